"""The cost of checking a sampler outside this process, measured in one run: the C example's reference through
``exec:`` (the process protocol) and ``lib:`` (the C ABI) against the numpy reference in process, default mode::

    python benchmarks/foreign_speed.py [--mode default]

Prints wall seconds, the ratio to the in-process run, the verdicts and the bytes sent per call (exec:).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    from specdec_check import check_verifier, samplers
    from specdec_check.foreign import exec_sampler, lib_sampler

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="default")
    args = parser.parse_args(argv)
    cc = shutil.which("cc") or shutil.which("gcc")
    folder = Path(tempfile.mkdtemp(prefix="specdec-c-"))
    source = ROOT / "examples" / "c" / "verify.c"
    subprocess.run([cc, "-O2", "-o", str(folder / "verify"), str(source), "-lm"], check=True)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-DSPECDEC_LIB", "-o", str(folder / "libverify.so"), str(source),
                    "-lm"], check=True)
    runs = {}
    exec_run = exec_sampler(f"{folder / 'verify'} --serve", "verifier")
    contenders = [("numpy reference, in process", samplers.numpy_verify),
                  ("C reference, exec: (process protocol)", exec_run),
                  ("C reference, lib: (C ABI)", lib_sampler(f"{folder / 'libverify.so'}:specdec_verify", "verifier")),
                  ("C bug (resample from target), exec:", exec_sampler(f"{folder / 'verify'} --serve --bug",
                                                                        "verifier")),
                  ("C bug (resample from target), lib:", lib_sampler(f"{folder / 'libverify.so'}:specdec_verify_bug",
                                                                      "verifier"))]
    cargo = shutil.which("cargo")
    if cargo is not None:
        target = folder / "rust"
        subprocess.run([cargo, "build", "--release", "--offline", "-q", "--manifest-path",
                        str(ROOT / "examples" / "rust" / "Cargo.toml")], check=True,
                       env={**__import__("os").environ, "CARGO_TARGET_DIR": str(target)})
        binary = target / "release" / "specdec-verify"
        contenders += [("Rust reference, exec:", exec_sampler(f"{binary} --serve", "verifier")),
                       ("Rust bug (shared uniform), exec:", exec_sampler(f"{binary} --serve --bug", "verifier"))]
    for label, sampler in contenders:
        started = time.perf_counter()
        report = check_verifier(sampler, mode=args.mode, seed=0)
        runs[label] = (time.perf_counter() - started, report)
    for _, sampler in contenders:
        if hasattr(sampler, "close"):
            sampler.close()
    base = runs["numpy reference, in process"][0]
    print(f"| sampler ({args.mode} mode) | verdict | samples | calls | wall s | ratio to in-process |")
    print("|---|---|---:|---:|---:|---:|")
    for label, (wall, report) in runs.items():
        calls = sum(s.calls for s in report.scenarios)
        print(f"| {label} | {report.verdict} | {report.samples_used:,} | {calls:,} | {wall:.1f} | {wall / base:.2f}x |")
    calls = exec_run._calls
    print(f"\nexec: sent {exec_run.bytes_sent / 1e6:,.1f} MB over {calls:,} calls: {exec_run.bytes_sent / calls / 1e3:,.1f} "
          "kB per call on average")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
