"""Guard for refactors: the same seed gives the same report JSON (timings aside).

Runs ``check_verifier`` / ``check_generator`` on the bundled references and on every
catalogued sampler in the given modes, and saves or compares the reports::

    python benchmarks/report_equality.py save /tmp/before --modes quick default
    python benchmarks/report_equality.py compare /tmp/before --modes quick default

Timings (``elapsed_s``) are dropped, and traceback evidence keeps only the exception line
(line numbers inside the checker move with any refactor). ``compare`` exits 1 on any
difference and prints the first differing path of each report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _normalise(value):
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "elapsed_s":
                continue
            if k == "traceback" and isinstance(v, str):
                v = v.strip().splitlines()[-1] if v.strip() else v
            out[k] = _normalise(v)
        return out
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def _entries():
    from specdec_check import samplers
    from specdec_check.bugs import catalogue

    yield "reference-verifier", "verifier", samplers.numpy_verify
    yield "reference-generator", "generator", samplers.numpy_generate
    for e in catalogue():
        yield e.name, e.kind, e.sampler


def _report(kind, sampler, mode, seed):
    from specdec_check.checker import check_generator, check_verifier

    check = check_verifier if kind == "verifier" else check_generator
    try:
        return _normalise(check(sampler, mode=mode, seed=seed).to_dict())
    except Exception as exc:  # noqa: BLE001 - a raising sampler is part of the record
        return {"raised": f"{type(exc).__name__}: {exc}"}


def _first_difference(a, b, path="$"):
    if type(a) is not type(b):
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'before' if k in a else 'after'}"
            d = _first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("save", "compare"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--modes", nargs="+", default=["quick", "default"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", default=None, help="entry names to run (default: all)")
    args = parser.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    differences = 0
    compared = 0
    for mode in args.modes:
        for name, kind, sampler in _entries():
            if args.only and name not in args.only:
                continue
            data = _report(kind, sampler, mode, args.seed)
            path = args.folder / f"{mode}-{name}.json"
            if args.action == "save":
                path.write_text(json.dumps(data, indent=1, sort_keys=True))
                print(f"saved {path.name}", flush=True)
                continue
            before = json.loads(path.read_text())
            compared += 1
            diff = _first_difference(before, json.loads(json.dumps(data)))
            if diff:
                differences += 1
                print(f"DIFFERENT {mode} {name}: {diff}", flush=True)
            else:
                print(f"same      {mode} {name}", flush=True)
    if args.action == "compare":
        print(f"{compared - differences} of {compared} reports identical (timings aside)")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
