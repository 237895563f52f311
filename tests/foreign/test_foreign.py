"""Samplers in other languages and processes (issue 28): the C and Rust examples through the process protocol,
the C library through the C ABI, record / answer / replay, and hostile programs.

The examples are built here (``cc``; ``cargo --offline``, standard library only) and each test is skipped, with
the reason, where the compiler is missing. Runs use fixed seeds on three small scenarios in quick mode."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specdec_check import check_verifier
from specdec_check.foreign import answer, exec_sampler, lib_sampler
from specdec_check.scenarios import default_verifier_battery

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SMALL_BATTERY = ROOT / "tests" / "cli"  # specdec_small_battery: two small scenarios (and the screen)
#: Scenarios of the API runs: small V, one with many rows per call, one with gamma 4.
NAMES = ("low-acceptance", "opposite-ranking", "target-equals-draft")
#: A hostile program's run is over in seconds; past this it hangs (what several tests look for).
RUN_LIMIT_S = 300


def _scenarios():
    return [s for s in default_verifier_battery() if s.name in NAMES]


@pytest.fixture(scope="session")
def c_build(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc or gcc) on this machine: the C example cannot be built")
    out = tmp_path_factory.mktemp("c")
    source = ROOT / "examples" / "c" / "verify.c"
    subprocess.run([cc, "-O2", "-o", str(out / "verify"), str(source), "-lm"], check=True)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-DSPECDEC_LIB", "-o", str(out / "libverify.so"), str(source),
                    "-lm"], check=True)
    return out


@pytest.fixture(scope="session")
def rust_build(tmp_path_factory):
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("no cargo on this machine: the Rust example cannot be built")
    target = tmp_path_factory.mktemp("rust-target")
    subprocess.run([cargo, "build", "--release", "--offline", "-q", "--manifest-path",
                    str(ROOT / "examples" / "rust" / "Cargo.toml")], check=True,
                   env=dict(os.environ, CARGO_TARGET_DIR=str(target)))
    return target / "release" / "specdec-verify"


def _cli(*args, cwd, env=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(SMALL_BATTERY), os.environ.get("PYTHONPATH"))
                                                      if p), **(env or {}))
    return subprocess.run([sys.executable, "-m", "specdec_check", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=RUN_LIMIT_S)


# --------------------------------------------------------------------------- the examples, every way in

def _through_the_protocol(program: str, bug: bool):
    sampler = exec_sampler(f"{program} --serve" + (" --bug" if bug else ""), "verifier")
    try:
        report = check_verifier(sampler, scenarios=_scenarios(), mode="quick", seed=0)
    finally:
        sampler.close()
    assert report.verdict == ("failed" if bug else "passed"), report.summary()
    assert report.protocol == 1


@pytest.mark.parametrize("bug", [False, True], ids=["reference", "resample-from-target"])
def test_the_c_example_through_the_process_protocol(c_build, bug):
    _through_the_protocol(c_build / "verify", bug)


@pytest.mark.parametrize("symbol, verdict", [("specdec_verify", "passed"), ("specdec_verify_bug", "failed")])
def test_the_c_example_through_the_c_abi(c_build, symbol, verdict):
    report = check_verifier(lib_sampler(f"{c_build / 'libverify.so'}:{symbol}", "verifier"), scenarios=_scenarios(),
                            mode="quick", seed=0)
    assert report.verdict == verdict, report.summary()


@pytest.mark.slow  # cargo builds the example first (10 to 20 s); the C example keeps the protocol in the fast tier
@pytest.mark.parametrize("bug", [False, True], ids=["reference", "shared-uniform"])
def test_the_rust_example_through_the_process_protocol(rust_build, bug):
    _through_the_protocol(rust_build, bug)


@pytest.mark.slow  # 30 s: records a quick run's 3,000 calls (the API tests above keep the paths in the fast tier)
def test_record_answer_anywhere_and_replay(c_build, tmp_path):
    recorded = _cli("record", "--out", "rec", "--mode", "quick", "--scenarios", "specdec_small_battery:verifier",
                    "--no-progress", "-q", cwd=tmp_path)
    assert recorded.returncode == 0, recorded.stderr
    live = json.loads((tmp_path / "rec" / "report" / "report.json").read_text())
    manifest = json.loads((tmp_path / "rec" / "manifest.json").read_text())
    assert manifest["kind"] == "verifier" and manifest["options"][:2] == ["--mode", "quick"]
    # The recorded reference answers, replayed: the same verdict and the same samples as the recording run.
    shutil.copytree(tmp_path / "rec" / "reference", tmp_path / "ref-out")
    again = _cli("replay", "rec", "ref-out", "--no-progress", "-q", cwd=tmp_path)
    replayed = json.loads((tmp_path / "rec" / "replay-report" / "report.json").read_text())
    assert again.returncode == 0 and again.stdout.strip() == "replay:rec:ref-out: PASSED", again.stderr
    assert (replayed["verdict"], replayed["samples_used"]) == (live["verdict"], live["samples_used"])
    assert replayed["protocol"] == 1 and replayed["sampler"] == "replay:rec:ref-out"
    # The C kernel run "elsewhere" on the recorded calls: the reference passes, the bug fails.
    for symbol, status in (("specdec_verify", 0), ("specdec_verify_bug", 1)):
        answer(tmp_path / "rec", tmp_path / symbol, lib_sampler(f"{c_build / 'libverify.so'}:{symbol}", "verifier"))
        judged = _cli("replay", "rec", symbol, "--no-progress", "--report", f"report-{symbol}", cwd=tmp_path)
        assert judged.returncode == status, judged.stdout + judged.stderr


@pytest.mark.slow
def test_a_replay_of_other_options_says_so(c_build, tmp_path):
    assert _cli("record", "--out", "rec", "--mode", "quick", "--scenarios", "specdec_small_battery:verifier",
                "--no-progress", "-q", cwd=tmp_path).returncode == 0
    shutil.copytree(tmp_path / "rec" / "reference", tmp_path / "out")
    manifest = tmp_path / "rec" / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "options": data["options"] + ["--seed", "1"]}))
    proc = _cli("replay", "rec", "out", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 1 and "the replay runs other options than the recording" in proc.stdout, proc.stdout


@pytest.mark.slow  # 50 s: two property-suite runs
def test_the_property_suite_runs_a_program(c_build, tmp_path):
    # --specdec-verifier exec:...: the suite's properties, each example a call of the C program (bug: fails).
    for bug, status in (("", 0), (" --bug", 1)):
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pyargs", "specdec_check.suite",
                               "-q", "-k", "contract or first_token or stop_conditional",
                               f"--specdec-verifier=exec:{c_build / 'verify'} --serve{bug}"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=RUN_LIMIT_S)
        assert proc.returncode == status, proc.stdout[-3000:] + proc.stderr[-2000:]


# --------------------------------------------------------------------------- hostile programs

#: The hostile cases of the fast tier (a usage error, a protocol error and an exit); the others are the slow tier's.
FAST_CASES = ("other_version", "garbage", "closes_stdout")


def _hostile(tmp_path, case, *extra):
    return _cli("verify", f"exec:{sys.executable} {HERE / 'hostile_program.py'} {case}", "--mode", "quick",
                "--scenarios", "specdec_small_battery:verifier", "--no-progress", "--report", "out", *extra,
                cwd=tmp_path)


@pytest.mark.parametrize("case, status, text", [pytest.param(*case, marks=[pytest.mark.slow] if case[0] not in FAST_CASES
                                                               else []) for case in [
    ("exits_at_once", 2, "the handshake failed"),
    ("prints_before_handshake", 2, "does not start with 'SDC <version> <verb>'"),
    ("other_version", 2, "speaks protocol version 2; this specdec-check speaks version 1"),
    ("closes_stdout", 1, "the program exited with status 0 during call 2"),
    ("garbage", 1, "does not start with 'SDC <version> <verb>'; it wrote b'\\x00\\x01binary garbage"),
    ("wrong_shape", 1, "output shape"),
    ("error_message", 1, "CUDA error: an illegal memory access was encountered"),
    ("floods_stderr", 1, "exited with status 7"),
]])
def test_a_hostile_program_gets_a_finding_or_a_usage_error_never_exit_0(tmp_path, case, status, text):
    proc = _hostile(tmp_path, case)
    assert proc.returncode == status, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert text in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-2000:]
    if status == 1:  # a check ran: its report is there, failed
        assert json.loads((tmp_path / "out" / "report.json").read_text())["verdict"] == "failed"


@pytest.mark.slow
def test_a_program_that_never_answers_is_stopped_by_the_timeout_with_a_partial_report(tmp_path):
    proc = _hostile(tmp_path, "never_answers", "--timeout", "3")
    assert proc.returncode == 1, proc.stderr
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["verdict"] == "failed" and data["findings"][-1]["check"] == "timeout", data["findings"][-1]
