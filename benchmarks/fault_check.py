"""Mutation check of the test tiers: seed small faults into the checker and see which tier catches each.

Each fault is one textual edit of one line of ``specdec_check/`` (a flipped comparison in a law test, a
dropped contract check, an off-by-one position, a skipped randomness check, a wrong rule name, ...).
For each, a copy of the working tree gets the edit, and the fast tier (the README's test command) runs
against it with ``-x`` (the tests of the faulty part first, see :data:`FIRST`); a fault the fast tier misses is then tried on the slow tier (``-m slow``), so the
table says for every fault whether the fast tier, only the full suite, or neither catches it::

    python benchmarks/fault_check.py                  # every fault, fast tier then slow tier where missed
    python benchmarks/fault_check.py --only 3 7       # some faults
    python benchmarks/fault_check.py --no-slow        # fast tier only

The copy is imported first (``PYTHONPATH``), so the installed package is never edited. Exits 1 when a
fault is caught by the full suite but not by the fast tier.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: pytest-xdist workers per tier run: the README's test commands use 2 (the machines have 2 cores).
WORKERS = 2


@dataclass(frozen=True)
class Fault:
    path: str
    old: str
    new: str
    what: str


FAULTS = (
    Fault("specdec_check/stats/_results.py", "return bool(self.pvalue <= self.alpha)",
          "return bool(self.pvalue < self.alpha / 10)", "every test rejects at a tenth of its alpha"),
    Fault("specdec_check/stats/_identity.py", "return np.flatnonzero((counts > 0) & (probs == 0))",
          "return np.flatnonzero((counts > 1) & (probs == 0))", "a single impossible outcome is no support violation"),
    Fault("specdec_check/stats/_identity.py", "viol = np.flatnonzero((counts > 0) & (probs == 0))",
          "viol = np.flatnonzero((counts < 0) & (probs == 0))", "the identity test ignores support violations"),
    Fault("specdec_check/stats/_ledger.py", "return self._total / self._planned",
          "return self._total / max(self._planned - 1, 1)", "the ledger splits alpha over one check too few"),
    Fault("specdec_check/stats/_sequential.py", "return bool(self._max_log_e >= -np.log(self._alpha))",
          "return bool(self._max_log_e >= -2 * np.log(self._alpha))", "the e-process rejects at alpha squared"),
    Fault("specdec_check/checker/chain/contract.py", "dropped = (step.final < 0) & (step.accepted < gamma)",
          "dropped = (step.final < 0) & (step.accepted < gamma - 1)", "a dropped final token at the last draft is missed"),
    Fault("specdec_check/checker/chain/contract.py", "rejected = (step.accepted < gamma) & (step.final >= 0)",
          "rejected = (step.accepted < gamma - 1) & (step.final >= 0)",
          "an impossible event at the last draft position is missed"),
    Fault("specdec_check/checker/chain/contract.py", "k = np.minimum(step.accepted, gamma - 1)",
          "k = np.minimum(step.accepted + 1, gamma - 1)", "the impossible-event check reads the next position"),
    Fault("specdec_check/checker/chain/contract.py",
          "return a >= b + tol * larger + tol * ABSOLUTE_TOLERANCE_SCALE",
          "return a >= b - tol * larger - tol * ABSOLUTE_TOLERANCE_SCALE", "the tolerance widens the wrong way"),
    Fault("specdec_check/checker/core/verdict.py", "if s.achieved_tv > design_tv:", "if s.achieved_tv > 2 * design_tv:",
          "a scenario at twice the design TV is not inconclusive"),
    Fault("specdec_check/checker/core/verdict.py", "if not law_bad and measured < reference:",
          "if measured < reference:", "a lossy sampler that accepts less is called inefficient, not failed"),
    Fault("specdec_check/checker/core/verdict.py", "if not any_law:", "if False:",
          "a run with no law test is not inconclusive"),
    Fault("specdec_check/checker/core/verdict.py",
          'acceptance = wording.acceptance_checks if ctx.options.rule == "standard" else ()',
          'acceptance = wording.acceptance_checks if ctx.options.rule == "any" else ()',
          "wrong rule name: the acceptance tests are judged under the other rule"),
    Fault("specdec_check/checker/chain/randomness.py",
          'if "independence" not in selection or options.rule != "standard":',
          'if "independence" not in selection or options.rule != "any":',
          "wrong rule name: the chain independence check runs only under rule='any'"),
    Fault("specdec_check/checker/checks/randomness.py", "if scenario.rows_per_call >= 2:",
          "if scenario.rows_per_call >= 3:", "no within-call independence test for two-row calls"),
    Fault("specdec_check/checker/checks/randomness.py", 'if ctx.stopped or not ctx.selected("determinism"):',
          "if True:", "the determinism check never runs"),
    Fault("specdec_check/checker/checks/randomness.py", "probs = np.clip(probs, 0.0, 1.0)",
          "probs = np.clip(probs * 2, 0.0, 1.0)", "the collision test expects twice the collisions"),
    Fault("specdec_check/checker/checks/probes.py", 'if not ctx.selected("zero_coins"):', "if True:",
          "the zero-coin probe never runs"),
    Fault("specdec_check/checker/core/policy.py", 'Case("robustness", "warning", "failure",',
          'Case("robustness", "failure", "failure",', "the robustness policy fails instead of warning"),
    Fault("specdec_check/exact/_enumerate.py",
          "block = accept[:, None] * np.maximum(target_rows - draft_rows, 0.0)",
          "block = accept[:, None] * np.maximum(target_rows - draft_rows, 0.0) * 0.999",
          "the exact step law's rejection mass is off by 0.1%"),
    Fault("specdec_check/exact/_enumerate.py",
          "accept = (accept[:, None] * np.minimum(target_rows, draft_rows)).reshape(-1)",
          "accept = (accept[:, None] * np.maximum(target_rows, draft_rows)).reshape(-1)",
          "the exact step law accepts with max(p, q)"),
    Fault("specdec_check/exact/_tree_kernels.py", "np.where(residual_at > 0, 1.0, 0.0))",
          "np.where(residual_at > 0, 0.0, 0.0))", "a tree child of draft probability 0 is never accepted"),
    # (Not ``codes * vocab`` for ``codes * (vocab + 1)``: contexts are left-padded with V, and base V is still
    # injective on those (every count of leading pads owns a disjoint range), so that mutant is equivalent.)
    Fault("specdec_check/exact/_recursion.py", "np.add.at(pair[t - 1], ctx[:, -1], weights[:, None] * probs)",
          "np.add.at(pair[t - 1], ctx[:, 0], weights[:, None] * probs)",
          "the pair law conditions on the oldest context token, not the newest"),
    Fault("specdec_check/checker/tree/contract.py", "bad = (out < -1) | (out >= vocab_size)",
          "bad = (out < -1) | (out > vocab_size)", "off by one: token id V is in range for trees"),
    Fault("specdec_check/checker/tree/contract.py", "real = out >= 0", "real = out > 0",
          "token 0 is read as padding in tree outputs"),
    Fault("specdec_check/checker/tree/contract.py",
          "holes = (real != (np.arange(width) < length[:, None])).any(axis=1) | (length == 0)",
          "holes = (real != (np.arange(width) < length[:, None])).any(axis=1)",
          "an empty tree output row is accepted"),
    Fault("specdec_check/checker/ragged/laws.py",
          "cells = requests * self.bins + np.minimum((u * self.bins).astype(np.int64), self.bins - 1)",
          "cells = requests * self.bins + np.minimum((u * self.bins).astype(np.int64), self.bins - 2)",
          "the ragged PIT histogram folds its last bin into the one before"),
    Fault("specdec_check/stats/_tv.py", "log2k = k * np.log(2.0) + np.log1p(-2.0 ** (1 - k)) if k < 60 else k * np.log(2.0)",
          "log2k = (k * np.log(2.0) + np.log1p(-2.0 ** (1 - k)) if k < 60 else k * np.log(2.0)) / 4",
          "the TV radius (Weissman bound) is too small"),
    Fault("specdec_check/checker/chain/screen.py",
          "rejected = np.flatnonzero((step.accepted < gamma) & (step.final >= 0))",
          "rejected = np.flatnonzero((step.accepted < gamma - 1) & (step.final >= 0))",
          "the screen's overflow probe skips rejections at the last draft"),
    Fault("specdec_check/exact/_tree_kernels.py", "return np.minimum(ratio, 1.0)", "return np.minimum(ratio, 0.99)",
          "tree acceptance ratios capped at 0.99"),
)


#: pyproject's ``package-dir``: folders that install under another name (the copy is imported through
#: ``PYTHONPATH``, not installed, so it gets them where the installed package has them).
PACKAGE_DIRS = {"strategies": "specdec_check/strategies"}


def _copy_tree(dest: Path) -> None:
    """The tracked and untracked-but-not-ignored files of the working tree (what the tests import), with
    :data:`PACKAGE_DIRS` also copied where they install."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    for name in files:
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    for folder, installed in PACKAGE_DIRS.items():
        shutil.copytree(dest / folder, dest / installed)


def _check_copy(copy: Path, folders: tuple, timeout_s: int) -> None:
    """The unfaulted copy imports from itself and passes the tests run first, so that a failure under a
    fault is the fault's (not an import of the installed package, nor a test failing anyway)."""
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    probe = ("import specdec_check, specdec_check.strategies as s, sys; "
             "print(specdec_check.__file__); print(s.__file__)")
    where = subprocess.run([sys.executable, "-c", probe], cwd=copy, env=env, capture_output=True, text=True)
    if where.returncode or any(not line.startswith(str(copy)) for line in where.stdout.split()):
        raise SystemExit(f"the copy does not import from itself:\n{where.stdout}{where.stderr}")
    if folders:
        caught, took, first = _run_tier(copy, sorted(folders), timeout_s)
        if caught is not False:
            raise SystemExit(f"the unfaulted copy fails its own tests ({first}): fix that first")
        print(f"baseline: the unfaulted copy passes {', '.join(sorted(folders))} in {took:.0f} s", flush=True)


def _apply(copy: Path, fault: Fault) -> None:
    path = copy / fault.path
    text = path.read_text()
    if text.count(fault.old) != 1:
        raise SystemExit(f"fault {fault.what!r}: {fault.old!r} occurs {text.count(fault.old)} times in {fault.path}, "
                         "not once; update the fault to the code")
    path.write_text(text.replace(fault.old, fault.new))


#: Test folders that exercise each part of the package, run first (a fault they catch is caught by the
#: fast tier, whose tests they are); the whole tier runs only when they catch nothing.
FIRST = (
    ("specdec_check/stats/", ("tests/stats",)),
    ("specdec_check/exact/_tree", ("tests/trees",)),
    ("specdec_check/exact/", ("tests/foundation", "tests/rules")),
    ("specdec_check/checker/tree/", ("tests/trees",)),
    ("specdec_check/checker/ragged/", ("tests/ragged",)),
    ("specdec_check/checker/", ("tests/checker", "tests/architecture")),
)


def _first_tests(fault: Fault) -> tuple:
    return next((tests for prefix, tests in FIRST if fault.path.startswith(prefix)), ())


def _run_tier(copy: Path, marker_args: list, timeout_s: int) -> tuple:
    """``(caught, seconds, first failing test)`` of one tier against the faulty copy."""
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-n", str(WORKERS), "-p", "no:cacheprovider",
                               *marker_args],
                              cwd=copy, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - started, f"timed out after {timeout_s} s"
    took = time.monotonic() - started
    failed = [line.split(" ", 1)[1].split(" - ")[0] for line in proc.stdout.splitlines()
              if line.startswith(("FAILED ", "ERROR "))]
    if proc.returncode == 0:
        return False, took, ""
    return True, took, failed[0] if failed else f"exit {proc.returncode}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", type=int, default=None, help="fault numbers (1-based) to run")
    parser.add_argument("--no-slow", action="store_true", help="do not try missed faults on the slow tier")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the unfaulted copy's run of the first-run folders (its import check stays)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per tier run (default 1800)")
    args = parser.parse_args(argv)
    chosen = [(i, f) for i, f in enumerate(FAULTS, 1) if args.only is None or i in args.only]
    rows, lost = [], 0
    with tempfile.TemporaryDirectory(prefix="specdec-faults-") as tmp:
        pristine = Path(tmp) / "pristine"
        _copy_tree(pristine)
        _check_copy(pristine, () if args.no_baseline else {t for _, f in chosen for t in _first_tests(f)},
                    args.timeout)
        for i, fault in chosen:
            copy = Path(tmp) / f"fault-{i}"
            shutil.copytree(pristine, copy)
            _apply(copy, fault)
            first = _first_tests(fault)
            fast, fast_s, where = _run_tier(copy, list(first), args.timeout) if first else (False, 0.0, "")
            if not fast:
                fast, more_s, where = _run_tier(copy, [], args.timeout)
                fast_s += more_s
            slow = None
            if not fast and not args.no_slow:
                slow, _, slow_where = _run_tier(copy, ["-m", "slow"], args.timeout)
                where = slow_where if slow else where
            verdict = ("fast tier" if fast else "slow tier only" if slow else
                       "neither" if slow is False else "fast tier missed (slow not run)")
            lost += bool(slow)
            rows.append((i, fault, verdict, fast_s, where))
            print(f"{i:2d}  {verdict:<16} {fast_s:6.0f} s  {fault.path}: {fault.what}  [{where}]", flush=True)
            shutil.rmtree(copy)
    print("\n| # | fault | file | caught by | fast tier s | first failing test |")
    print("|---|---|---|---|---|---|")
    for i, fault, verdict, took, where in rows:
        print(f"| {i} | {fault.what} | `{fault.path.removeprefix('specdec_check/')}` | {verdict} | {took:.0f} | "
              f"`{where}` |")
    caught = sum(v == "fast tier" for _, _, v, _, _ in rows)
    print(f"\nfast tier caught {caught} of {len(rows)}; caught only by the slow tier: {lost}")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
