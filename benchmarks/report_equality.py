"""Guard for refactors: the same seed gives the same report JSON (timings aside), for every kind.

Runs every sampler kind's bundled references (chain verifier under both rules, decode loop, the
three tree schemes, the ragged convention, the token sampler; the torch references of the chain,
tree and ragged kinds in quick mode) and every entry of every catalogue (chain, rule, tree, ragged:
each under its own rule and scheme; the token-sampler catalogue in quick mode) in the given modes,
and saves or compares the reports::

    python benchmarks/report_equality.py save /tmp/before --modes quick default
    python benchmarks/report_equality.py compare /tmp/before --modes quick default

Timings (``elapsed_s``) are dropped, and traceback evidence keeps only the exception line
(line numbers inside the checker move with any refactor). ``compare`` exits 1 on any
difference and prints the first differing path of each report.

``--intended NAME`` declares a change a commit makes on purpose; the reports are then compared
after removing exactly that change from both, and every report it explains is listed as such:

- ``zero-coin-probe`` (issue 25): the zero-coin probe runs in every verifier kind, so chain and
  ragged reports gain the ``zero_coins`` check, its record per scenario, its one call (also in an
  inconclusive scenario's "over N calls") and, for samplers that mishandle a zero coin, its findings.
- ``better-rule-wording`` (issue 25): a rule that accepts more than the reference is told "a better
  rule" only when its law tests passed ("not a better rule" when they failed).
"""

from __future__ import annotations

import argparse
import json
import re
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


def _entries(mode):
    """``(name, kind, sampler, keywords)`` of every report the guard compares in ``mode``."""
    from specdec_check import samplers
    from specdec_check.bugs import catalogue, ragged_catalogue, token_catalogue, tree_catalogue

    yield "reference-verifier", "verifier", samplers.numpy_verify, {}
    yield "reference-verifier-any", "verifier", samplers.numpy_verify, {"rule": "any"}
    yield "reference-generator", "generator", samplers.numpy_generate, {}
    for drafting in ("iid", "without_replacement", "topk"):
        yield (f"reference-tree-{drafting}", "tree_verifier", getattr(samplers, f"numpy_verify_tree_{drafting}"),
               {"drafting": drafting})
    yield "reference-tree-topk-any", "tree_verifier", samplers.numpy_verify_tree_topk, {"drafting": "topk",
                                                                                          "rule": "any"}
    yield "reference-ragged", "ragged_verifier", samplers.numpy_ragged_verify, {}
    if mode == "quick":  # the torch path (CPU, float64 and float32) of the kinds that have one
        torch = {"backend": "torch"}
        yield "torch-reference-verifier", "verifier", "specdec_check.samplers:torch_verify", torch
        yield ("torch-reference-verifier-float32", "verifier", "specdec_check.samplers:torch_verify",
               {**torch, "dtype": "float32"})
        yield ("torch-reference-tree-topk", "tree_verifier", "specdec_check.samplers:torch_verify_tree_topk",
               {**torch, "drafting": "topk"})
        yield ("torch-reference-ragged", "ragged_verifier", "specdec_check.samplers:torch_ragged_verify", torch)
    for e in catalogue():
        yield e.name, e.kind, e.sampler, ({"rule": e.rule} if e.kind == "verifier" else {})
    for e in tree_catalogue():
        yield f"tree-{e.name}", "tree_verifier", e.sampler, {"drafting": e.drafting, "rule": e.check_rule}
    for e in ragged_catalogue():
        yield f"ragged-{e.name}", "ragged_verifier", e.sampler, {}
    yield "reference-token-sampler", "token_sampler", samplers.numpy_sample, {}
    if mode == "quick":  # in default mode a failing entry still plans its whole battery (~1 min each)
        for e in token_catalogue():
            kind = "draft_consistency" if e.kind == "draft_sampler" else "token_sampler"
            yield f"token-{e.name}", kind, e.sampler, {}


def _report(kind, sampler, mode, seed, keywords):
    import pkgutil

    from specdec_check import checker

    check = getattr(checker, f"check_{kind}")  # check_verifier ... check_token_sampler, check_draft_consistency
    if isinstance(sampler, str):
        sampler = pkgutil.resolve_name(sampler)
    try:
        return _normalise(check(sampler, mode=mode, seed=seed, **keywords).to_dict())
    except Exception as exc:  # noqa: BLE001 - a raising sampler is part of the record
        return {"raised": f"{type(exc).__name__}: {exc}"}


def _zero_coin_probe(before, after):
    """Both reports without the zero-coin probe: its check name, its records, and (where only ``after`` ran
    it) its one call per scenario."""
    def strip(report):
        report = json.loads(json.dumps(report))
        if "checks" in report:
            report["checks"] = [c for c in report["checks"] if c != "zero_coins"]
        ran = {r["scenario"] for r in report.get("results", ()) if r["check"] == "zero_coins"
               and r["method"] != "skipped"}
        report["results"] = [r for r in report.get("results", ()) if r["check"] != "zero_coins"]
        return report, ran

    before, ran_before = strip(before)
    after, ran_after = strip(after)
    gained = ran_after - ran_before
    for scenario in after.get("scenarios", ()):
        if scenario["name"] in gained:
            scenario["calls"] -= 1
    # The probe's own findings (edge-case warnings of samplers that mishandle a zero coin), and the one call
    # it adds to the call count that an inconclusive scenario's reason states.
    after["findings"] = [f for f in after.get("findings", ()) if f.get("check") != "zero_coins"]
    for item in after.get("inconclusive", ()):
        if item.get("scenario") in gained and isinstance(item.get("reason"), str):
            item["reason"] = re.sub(r"over ([\d,]+) calls", lambda m: f"over {int(m.group(1).replace(',', '')) - 1:,} calls",
                                    item["reason"])
    return before, after


#: The two endings of an efficiency finding of a rule that accepts more than the reference rule.
_BETTER_RULE = re.compile(r"(: a better rule than the (standard one|reference)|; its output law failed the law tests, so "
                          r"it buys acceptance with a loss: not a better rule)$")


def _better_rule_wording(before, after):
    """Both reports with the ending of "accepts more than the reference rule" findings removed: before,
    every such finding said "a better rule"; now only a rule whose law tests passed is told so."""
    for report in (before, after):
        for f in report.get("findings", ()):
            if f.get("check") == "efficiency" and isinstance(f.get("message"), str):
                f["message"] = _BETTER_RULE.sub("", f["message"])
    return before, after


INTENDED = {"zero-coin-probe": _zero_coin_probe, "better-rule-wording": _better_rule_wording}


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
    parser.add_argument("--intended", nargs="*", default=[], choices=tuple(INTENDED),
                        help="changes made on purpose, removed from both reports before comparing")
    args = parser.parse_args(argv)
    args.folder.mkdir(parents=True, exist_ok=True)
    differences = 0
    compared = 0
    for mode in args.modes:
        for name, kind, sampler, keywords in _entries(mode):
            if args.only and name not in args.only:
                continue
            data = _report(kind, sampler, mode, args.seed, keywords)
            path = args.folder / f"{mode}-{name}.json"
            if args.action == "save":
                path.write_text(json.dumps(data, indent=1, sort_keys=True))
                print(f"saved {path.name}", flush=True)
                continue
            before, after = json.loads(path.read_text()), json.loads(json.dumps(data))
            compared += 1
            diff = _first_difference(before, after)
            explained = []
            for change in args.intended:
                if diff:
                    before, after = INTENDED[change](before, after)
                    if _first_difference(before, after) != diff:
                        explained.append(change)
                    diff = _first_difference(before, after)
            if diff:
                differences += 1
                print(f"DIFFERENT {mode} {name}: {diff}", flush=True)
            elif explained:
                print(f"intended  {mode} {name}: same after {', '.join(explained)}", flush=True)
            else:
                print(f"same      {mode} {name}", flush=True)
    if args.action == "compare":
        print(f"{compared - differences} of {compared} reports identical (timings aside)")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
