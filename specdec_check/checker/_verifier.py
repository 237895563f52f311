"""check_verifier: run a verifier on the scenario battery and test everything it emits."""

from __future__ import annotations

import time
import traceback

import numpy as np

from .. import stats
from ..exact import encode_emitted, num_step_outcomes, step_law
from ..exact._enumerate import _acceptance, _path_step_law
from ..scenarios import VerifierScenario, VerifierScreen, default_verifier_battery
from ._block import VerifierBlock, reuse_count
from ._callables import VERIFIER_KEYWORDS
from ._outputs import any_impossible, check_output, impossible_events, parse_step
from ._report import CheckReport, ScenarioSummary, TestRecord
from ._run import ScenarioRunBase, planned_samples, run_battery
from ._tally import CountTally, PitTally

__all__ = ["VERIFIER_CHECKS", "check_verifier"]

VERIFIER_CHECKS = (
    "screen",
    "contract",
    "non_finite",
    "impossible",
    "step_law",
    "first_token",
    "stop_conditional",
    "accepted_count",
    "efficiency",
    "determinism",
    "independence",
    "batch_invariance",
)
#: Law checks whose failure means the output law is wrong (not merely inefficient).
_OUTPUT_LAW_CHECKS = ("first_token", "stop_conditional", "step_law", "batch_invariance")
#: Rows per call in the determinism and independence checks (pairs, not power, are what they need).
_RANDOMNESS_ROWS = 4096
#: Largest vocabulary for the path-conditional joint (k, y) test: (gamma+1) * V cells per row.
_PATH_LAW_MAX_VOCAB = 1000
#: Small calls are drawn together, up to this many probability cells (or 64 calls) per draw.
_POOL_CELLS = 1 << 18
_POOL_CALLS = 64


class _CallPool:
    """Calls of ``rows`` rows cut from draws of several calls at once (views, no copies).

    Drawing costs a fixed overhead per draw (contexts, one pass per position), which dominates
    calls of a few rows; rows are drawn independently, so a window of a larger draw is
    distributed as a call of its own (:meth:`VerifierScenario.draw` with ``calls``).
    """

    def __init__(self, run: "_ScenarioRun", rows=None, *, windows: int):
        s = run.scenario
        self.run, self.rows = run, rows
        self.width = s.rows_per_call if rows is None else max(1, min(int(rows), s.rows_per_call))
        cells = self.width * (2 * s.gamma + 1) * s.vocab_size
        self.most = int(max(1, min(_POOL_CALLS, _POOL_CELLS // cells)))
        self.remaining = max(1, int(windows))  # windows the caller may still ask for (no more are drawn)
        self.draw, self.left, self.at = None, 0, 0

    def next(self):
        """The next call's inputs."""
        if not self.left:
            calls = max(1, min(self.most, self.remaining))
            self.draw, self.left, self.at = self.run.draw(rows=self.rows, calls=calls), calls, 0
            self.remaining -= calls
        self.left -= 1
        draw, start = self.draw, self.at
        self.at += self.width
        if not self.left:  # the pool is used up: only the caller's windows keep it alive now
            self.draw = None
        if start == 0 and not self.left:
            return draw
        return draw.head(slice(start, start + self.width))


def _snapshot(kwargs):
    return {k: (v.clone() if hasattr(v, "clone") else np.array(v, copy=True)) for k, v in kwargs.items()}


def _same(a, b) -> bool:
    if hasattr(a, "equal") and hasattr(a, "detach"):  # torch tensors of any dtype (bfloat16 has no numpy twin)
        return a.shape == b.shape and a.dtype == b.dtype and bool(a.equal(b))
    return a.shape == b.shape and np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def _planned_tests(scenario: VerifierScenario, checks) -> list:
    if isinstance(scenario, VerifierScreen):  # impossible events, then a few exact small-sample tests
        from ._screen_run import screen_plan

        return screen_plan(checks)
    tests = []
    for name in ("first_token", "stop_conditional", "accepted_count"):
        if name in checks and (scenario.gamma or name == "first_token"):
            tests.append(name)
    if "step_law" in checks:
        if scenario.vocab_size <= _PATH_LAW_MAX_VOCAB:
            tests.append("step_law")
        if scenario.enumerable:
            tests.append("step_law_integrated")
    if "efficiency" in checks and scenario.gamma:
        tests.append("efficiency")
    if "independence" in checks:
        tests.append("independence_calls")
        if scenario.rows_per_call >= 2:
            tests.append("independence_rows")
    if "batch_invariance" in checks and scenario.rows_per_call >= 16 and scenario.vocab_size <= _PATH_LAW_MAX_VOCAB:
        tests.append("batch_invariance")
    return tests


def check_verifier(verify, *, scenarios=None, mode="default", backend="numpy", seed=0, alpha=1e-6, progress=None,
                   checks=None, device=None, dtype=None, monitor=None) -> CheckReport:
    """Check that ``verify`` reproduces the exact law of one speculative step.

    ``verify(*, draft_token_ids, draft_probs, target_probs, generator)`` is run on every
    scenario (default :func:`~specdec_check.scenarios.default_verifier_battery`). Each call
    is checked for the output contract and for events of probability zero; the outputs
    are tested against exact laws (first token against the target row, the token at the
    stop position against the residual or bonus row, the accepted count, the joint (k, y)
    law given the path and, where enumerable, the step law integrated over drafts,
    Leviathan et al. 2023 Theorem 3.5); the acceptance count against the optimum
    ``sum_x min(p, q)``; determinism and independence of the randomness. ``alpha`` is the
    false-alarm budget of the whole call, split evenly over every statistical test. ``monitor``
    (optional) is told when the run starts, around every call of ``verify`` and after each scenario
    (:mod:`specdec_check._isolation` uses it to supervise a run from another process).
    """
    return run_battery(kind="verifier", command="verify", sampler=verify, keywords=VERIFIER_KEYWORDS,
                       scenario_type=VerifierScenario, default_battery=default_verifier_battery, plan=_planned_tests,
                       run_class=_scenario_run, known_checks=VERIFIER_CHECKS, scenarios=scenarios, mode=mode,
                       backend=backend, seed=seed, alpha=alpha, progress=progress, checks=checks, device=device,
                       dtype=dtype, monitor=monitor)


class _ScenarioRun(ScenarioRunBase):
    """Everything the checker does for one verifier scenario."""

    def __init__(self, *args):
        super().__init__(*args)
        self.verify = self.sampler
        self.bonus_missing = 0
        self.pool = None if self.scenario.fixed_target_probs is not None else self.scenario.prompts()
        self.tables = self.scenario.law_tables(self.law_rows)
        self.accepted_total = 0.0
        self.accepted_expected = 0.0
        self.first_accepted = 0
        self.first_accept_groups = []  # [acceptance probabilities at position 1 of a block, uses]
        self.emitted_total = 0

    # -- helpers -----------------------------------------------------------------------------------
    @property
    def law_rows(self):
        return self.backend.law_rows if self.backend.casts_rows else None

    def draw(self, rows=None, calls=1):
        more = {"calls": calls} if calls > 1 else {}  # scenarios that draw one call at a time need not know
        return self.scenario.draw(self.rng, self.law_rows, pool=self.pool, rows=rows, tables=self.tables, **more)

    def call(self, draw, seed, check="contract"):
        """Run the verifier on ``draw``; its output on the host, or None after a finding that stops the scenario."""
        out = self.call_parsed(draw, seed, check)[0]
        return out if out is None or isinstance(out, np.ndarray) else self.backend.to_host(out)

    def call_parsed(self, draw, seed, check="contract"):
        """:meth:`call` and the decoded output: ``(out, step)``, or ``(None, None)``."""
        kwargs = self.backend.verifier_inputs(draw.draft_token_ids, draw.draft_probs, draw.target_probs)
        watch = "contract" in self.checks and not self.backend.read_only_inputs
        originals = _snapshot(kwargs) if watch else None
        self.calls += 1
        try:
            out = self.sampler_call(self.verify, **kwargs, generator=self.backend.generator(seed))
        except Exception as exc:  # the verifier's own error becomes a finding
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
            if self.backend.read_only_inputs and "read-only" in str(exc):
                changed = self.modified_inputs(kwargs, seed)
                self.fail("contract", f"the verifier modified its input(s) {changed} in place ({type(exc).__name__} "
                          f"on the read-only inputs: {exc})", {"modified": changed, "traceback": tb})
            else:
                self.fail(check, f"the verifier raised {type(exc).__name__}: {exc}", {"traceback": tb})
            self.stopped = True
            return None, None
        if originals is not None:
            changed = [k for k in kwargs if not _same(kwargs[k], originals[k])]
            if changed:
                self.fail("contract", f"the verifier modified its input(s) {changed} in place", {"modified": changed})
                self.stopped = True
                return None, None
        if self.backend.counts_on_device and self.backend.on_device(out):
            step = self.backend.parse_on_device(out, kwargs["draft_token_ids"], self.scenario.vocab_size)
            if step is not None:  # well formed: the output stays where the sampler left it
                return out, step
        try:
            out = self.backend.to_host(out)
        except Exception as exc:
            self.fail("contract", f"the verifier's output could not be read as an integer array: {exc}")
            self.stopped = True
            return None, None
        # Shape, dtype and range are checked whatever the selection: parsing the output needs them.
        problem, step = check_output(out, draw.draft_token_ids, self.scenario.vocab_size)
        if problem is not None:
            self.fail("contract", problem[0], problem[1])
            self.stopped = True
            return None, None
        return out, step

    def modified_inputs(self, kwargs, seed) -> list:
        """Rerun on writable copies (same seed) to name the inputs the verifier writes into."""
        copies = {k: np.array(v, copy=True) for k, v in kwargs.items()}
        try:
            self.sampler_call(self.verify, **copies, generator=self.backend.generator(seed))
        except Exception:  # noqa: BLE001 - only the names of the modified inputs matter here
            pass
        return [k for k in kwargs if not np.array_equal(copies[k], kwargs[k], equal_nan=True)] or ["(unknown)"]

    def non_finite_probe(self):
        """Row 0 gets an all-NaN first target row (always read): the verifier must raise or return -1s.

        A verifier may raise, or mark the row invalid with -1 everywhere (the sync-free choice on a
        device); emitting a token from a NaN law is a contract failure.
        """
        draw = self.draw(rows=_RANDOMNESS_ROWS)
        target = draw.target_probs.copy()
        target[0, 0, :] = np.nan
        bad = type(draw)(draw.draft_token_ids, draw.draft_probs, target, draw.pool_index)
        kwargs = self.backend.verifier_inputs(bad.draft_token_ids, bad.draft_probs, bad.target_probs)
        self.calls += 1
        try:
            out = self.backend.to_host(self.sampler_call(self.verify, **kwargs,
                                                         generator=self.backend.generator(self.next_seed())))
        except Exception as exc:  # raising on NaN input is the right answer
            self.records.append(TestRecord(self.scenario.name, "non_finite", "non-finite input probe", True, 0.0, 1,
                                           details={"behaviour": f"raised {type(exc).__name__}"}))
            return
        row = np.asarray(out)[0] if np.ndim(out) == 2 else None
        passed = row is not None and bool((row == -1).all())
        self.records.append(TestRecord(self.scenario.name, "non_finite", "non-finite input probe", passed, 0.0, 1,
                                       details={"behaviour": "returned -1 for the row" if passed else "emitted tokens"}))
        if not passed:
            self.fail("non_finite", "a row whose first target row is all NaN was silently turned into tokens "
                      f"{None if row is None else row.tolist()}; raise an error or return -1 for such a row",
                      {"row": 0, "output": None if row is None else row.tolist()})

    def next_seed(self) -> int:
        return int(self.rng.integers(0, 2**63 - 1))

    # -- the main loop -------------------------------------------------------------------------------
    def execute(self):
        started = time.perf_counter()
        s, mode = self.scenario, self.mode
        per_check = self.ledger.per_check
        bins = mode.pit_bins
        planned_n = planned_samples(mode.design_tv, bins, per_check / 2)
        n_target = min(planned_n, mode.max_samples)
        cells_per_call = s.rows_per_call * (2 * s.gamma + 1) * s.vocab_size
        calls = int(max(1, min(mode.max_calls, -(-n_target // s.rows_per_call), mode.max_cells // cells_per_call)))
        tallies = {}
        for name in ("first_token", "stop_conditional", "accepted_count", "step_law"):
            if name in self.plan:
                tallies[name] = PitTally(s.name, name, bins=bins, alpha=self.ledger.spend(f"{s.name}/{name}"))
        integrated = None
        if "step_law_integrated" in self.plan:
            law = np.concatenate([step_law(s.target, s.draft, s.gamma, p[p >= 0]) for p in self.pool]) / len(self.pool)
            integrated = CountTally(s.name, "step_law", law, alpha=self.ledger.spend(f"{s.name}/step_law_integrated"))
            integrated.method = "integrated step law (context, emitted string)"
        outcomes = num_step_outcomes(s.vocab_size, s.gamma) if integrated is not None else 0
        pit_rng = np.random.default_rng(self.rng.integers(2**63))
        if "non_finite" in self.checks:
            self.non_finite_probe()
        reuse = reuse_count(cells_per_call)
        conditional = "stop_conditional" in tallies or "step_law" in tallies
        block, inputs = None, _CallPool(self, windows=-(-calls // reuse))
        for _ in range(calls):
            if block is None or block.uses >= reuse:
                block = VerifierBlock(inputs.next(), conditional=conditional, tables=self.tables)
            out, step = self.call_parsed(block.draw, self.next_seed())
            if out is None:
                break
            self.samples += out.shape[0]
            fresh = block.uses == 0
            block.uses += 1
            if not self.absorb(block, out, step, tallies, integrated, outcomes, pit_rng, fresh=fresh):
                break
            if any(t.rejected_early for t in tallies.values()) or (integrated is not None and integrated.rejected_early):
                break
        if self.bonus_missing and "step_law" in tallies:
            del tallies["step_law"]
            self.note_skipped("step_law", "the verifier omits the bonus token, so (k, y) is undefined for k = gamma")
        if self.bonus_missing and integrated is not None:
            integrated = None
            self.note_skipped("step_law", "integrated step law skipped: the bonus token is missing")
        law_records = [t.record() for t in tallies.values()]
        if integrated is not None:
            law_records.append(integrated.record())
        self.records += law_records
        if not self.stopped:
            self.efficiency()
            self.randomness()
        self.classify()
        self.summary = self.make_summary(time.perf_counter() - started)

    def note_skipped(self, check, why):
        self.records.append(TestRecord(self.scenario.name, check, "skipped", True, 0.0, 0, details={"skipped": why}))

    def structural(self, block, out, step, outcome, *, tolerance=None) -> bool:
        """Events of probability zero in one call (no false-alarm budget); False after a finding.

        ``tolerance`` overrides the backend's (the screen's rows are exact in every dtype)."""
        draw, gamma = block.draw, self.scenario.gamma
        tolerance = self.backend.tolerance if tolerance is None else tolerance
        no_final = step.final < 0
        if no_final.any():
            dropped = no_final & (step.accepted < gamma)
            if dropped.any():
                b = int(np.flatnonzero(dropped)[0])
                self.fail("impossible", "a row stops before its last draft with every emitted token equal to a draft "
                          "and no final token: either the recovered token equals the rejected draft (impossible: "
                          "a draft is rejected only where q(x) > p(x), so the residual is zero there) or the "
                          "recovered token was dropped (lossy)",
                          {"row": b, "drafts": draw.draft_token_ids[b].tolist(), "output": out[b].tolist()})
                self.stopped = True
                return False
            self.bonus_missing += int(no_final.sum())
        if "impossible" in self.checks:
            events = impossible_events(step, draw.draft_token_ids, draw.draft_probs, draw.target_probs,
                                       tolerance=tolerance, gathered=(block.target_at, block.draft_at,
                                                                      outcome.target, outcome.draft))
            for message, evidence in events:
                evidence["tolerance"] = tolerance
                self.fail("impossible", message, evidence)
            if events:
                self.stopped = True
                return False
        return True

    def absorb(self, block, out, step, tallies, integrated, outcomes, pit_rng, *, fresh=True) -> bool:
        """Check one call's outputs against the block's exact laws; False when the scenario must stop.

        Tests conditional on the drafted paths take every call; the first token's marginal law
        (target row 0) and the step law integrated over drafts hold only over fresh drafts, so
        they take the first call on each block (``fresh``) alone.

        Outputs a device backend left on its device are checked there (:meth:`device_block`): the
        laws go to the device once per block and only counts come back. A flagged event of
        probability zero sends the call's output to the host, whose path names the rows.
        """
        s, draw = self.scenario, block.draw
        gamma = s.gamma
        host = isinstance(out, np.ndarray)
        if not host:
            block = self.device_block(block)
            outcome = block.outcome(step.accepted, step.final)
            if any_impossible(step, outcome, block, tolerance=self.backend.tolerance if "impossible" in self.checks
                              else float("inf")):
                out = self.backend.to_host(out)
                return self.absorb(block.host, out, check_output(out, draw.draft_token_ids, s.vocab_size)[1],
                                   tallies, integrated, outcomes, pit_rng, fresh=fresh)
            self.bonus_missing += int((step.final < 0).sum())
            uniforms = self.backend.uniforms(int(pit_rng.integers(2**63)))
        else:
            outcome = block.outcome(step.accepted, step.final)
            if not self.structural(block, out, step, outcome):
                return False
            uniforms = pit_rng.random
        self.accepted_total += float(step.accepted.sum())
        self.accepted_expected += block.expected_accepted
        self.emitted_total += int(step.emitted.sum())
        if gamma:
            self.first_accepted += int((step.accepted > 0).sum())
            if not self.first_accept_groups or self.first_accept_groups[-1][0] is not block.accept_first:
                self.first_accept_groups.append([block.accept_first, 0])
            self.first_accept_groups[-1][1] += 1
        try:
            if "first_token" in tallies and fresh:
                first = out[:, 0] if host else out[:, 0].long()
                tallies["first_token"].add_uniforms(block.pit_first(first, uniforms(first.shape[0])),
                                                    categories=first, expected=block.first_expected)
            if "stop_conditional" in tallies:
                if host and not self.bonus_missing:  # every row so far has a final token: no subset
                    has, final = None, step.final
                else:
                    has = np.flatnonzero(step.final >= 0) if host else (step.final >= 0).nonzero()[:, 0]
                    final = step.final[has]
                tallies["stop_conditional"].add_uniforms(block.pit_final(outcome, has, uniforms(final.shape[0])),
                                                         categories=final, expected=block.final_expected)
            if "accepted_count" in tallies:
                tallies["accepted_count"].add_uniforms(block.pit_count(outcome, uniforms(step.accepted.shape[0])),
                                                       categories=step.accepted, expected=block.count_expected)
            if "step_law" in tallies and not self.bonus_missing:
                codes = step.accepted * s.vocab_size + step.final
                tallies["step_law"].add_uniforms(block.pit_step(outcome, uniforms(codes.shape[0])),
                                                 categories=codes, expected=block.step_expected)
        except ValueError as exc:  # a sample on a zero-probability outcome
            self.fail("impossible", f"an output has probability zero under the exact law: {exc}")
            self.stopped = True
            return False
        if integrated is not None and fresh and not self.bonus_missing:
            if host:
                integrated.add_codes(draw.pool_index * outcomes + encode_emitted(out, s.vocab_size))
            else:
                codes = self.backend.encode_on_device(out, s.vocab_size)
                integrated.add_codes(self.backend.to_device(draw.pool_index) * outcomes + codes)
        return True

    def device_block(self, block):
        """The block's laws on the backend's device, made once per block (the scenario's law tables once per run)."""
        if getattr(block, "device_copy", None) is None:
            shared = {} if self.tables is None else {id(a): a for a in (self.tables.target, self.tables.draft,
                                                                         self.tables.target_below, self.tables.final_below)}
            cache = self.__dict__.setdefault("_device_tables", {})

            def to_tensor(array):
                if id(array) in shared and shared[id(array)] is array:
                    if id(array) not in cache:
                        cache[id(array)] = self.backend.to_device(array)
                    return cache[id(array)]
                return self.backend.to_device(array)

            block.device_copy = block.on_device(to_tensor)
        return block.device_copy

    # -- efficiency ----------------------------------------------------------------------------------
    def efficiency(self):
        if "efficiency" not in self.plan or not self.first_accept_groups:
            return
        probs, repeats = self.first_accept_probs()
        alpha = self.ledger.spend(f"{self.scenario.name}/efficiency")
        res = stats.poisson_binomial_test(self.first_accepted, probs, alpha=alpha, repeats=repeats)
        self.records.append(TestRecord(
            self.scenario.name, "efficiency", "exact Poisson-binomial (first-position acceptances)", not res.rejected,
            alpha, res.n, statistic=float(res.statistic), pvalue=float(res.pvalue),
            details={"accepted": int(self.first_accepted), "expected": res.expected,
                     "accepted_per_step": self.accepted_total / max(self.samples, 1),
                     "optimal_accepted_per_step": self.accepted_expected / max(self.samples, 1)},
        ))

    def first_accept_probs(self):
        """``(probs, repeats)``: acceptance probabilities of every first draft tested, and how many
        calls saw each (a block of inputs serves several calls)."""
        probs = np.concatenate([g[0] for g in self.first_accept_groups])
        repeats = np.concatenate([np.full(g[0].size, g[1]) for g in self.first_accept_groups])
        return probs, repeats

    # -- randomness ----------------------------------------------------------------------------------
    def collision_probs(self, draw):
        block = VerifierBlock(draw, conditional=True, tables=self.tables)
        return block.collision_probs(bonus_missing=bool(self.bonus_missing))

    def small_draw(self, limit=_RANDOMNESS_ROWS):
        """A draw of at most ``limit`` rows: randomness checks need pairs, not huge calls."""
        return self.draw(rows=limit)

    def randomness(self):
        s = self.scenario
        if "determinism" in self.checks:
            draw = self.small_draw()
            seed = self.next_seed()
            first = self.call(draw, seed, "determinism")
            second = self.call(draw, seed, "determinism") if first is not None else None
            if first is not None and second is not None and not np.array_equal(first, second):
                row = int(np.flatnonzero((first != second).any(axis=1))[0])
                self.fail("determinism", "two calls with the same generator state on the same inputs gave different "
                          "outputs: the verifier uses randomness other than its generator",
                          {"row": row, "first": first[row].tolist(), "second": second[row].tolist()})
            self.records.append(TestRecord(s.name, "determinism", "exact replay", first is not None and second is not None
                                           and np.array_equal(first, second), 0.0, int(len(draw.pool_index))))
        pairs = max(200, min(self.mode.max_samples // 8, 4000))
        if "independence_calls" in self.plan and not self.stopped:
            self.collisions("independence", pairs, within_call=False)
        if "independence_rows" in self.plan and not self.stopped:
            self.collisions("independence", pairs, within_call=True)
        if "batch_invariance" in self.plan and not self.stopped:
            self.batch_invariance()

    def collisions(self, check, pairs, *, within_call):
        """Count identical outputs for identical inputs: under independence each row pair collides
        with probability sum_o P(o)^2, so the count is exactly Poisson-binomial."""
        s = self.scenario
        label = "rows within a call" if within_call else "calls with fresh generators"
        alpha = self.ledger.spend(f"{s.name}/{check}/{'rows' if within_call else 'calls'}")
        hits, probs, n_calls = 0, [], 0
        cells_per_call = s.rows_per_call * (2 * s.gamma + 1) * s.vocab_size
        max_calls = max(4, min(self.mode.max_calls // 4, int(self.mode.max_cells // (4 * cells_per_call))))
        width = min(s.rows_per_call, _RANDOMNESS_ROWS)
        half = width // 2
        windows = min(max_calls, -(-pairs // half)) if within_call else min(-(-max_calls // 2), -(-pairs // width))
        inputs = _CallPool(self, _RANDOMNESS_ROWS, windows=windows)
        while len(probs) == 0 or sum(p.size for p in probs) < pairs:
            if n_calls >= max_calls:
                break
            draw = inputs.next()
            if within_call:
                pick = np.repeat(np.arange(half), 2)
                draw = draw.head(pick)
                out = self.call(draw, self.next_seed(), check)
                n_calls += 1
                if out is None:
                    return
                same = np.all(out[0::2] == out[1::2], axis=1)
                probs.append(self.collision_probs(draw)[0::2])
            else:
                first = self.call(draw, self.next_seed(), check)
                second = self.call(draw, self.next_seed(), check) if first is not None else None
                n_calls += 2
                if second is None:
                    return
                same = np.all(first == second, axis=1)
                probs.append(self.collision_probs(draw))
            hits += int(same.sum())
        self.collision_verdict(check, label, hits, np.concatenate(probs), alpha)

    def collision_verdict(self, check, label, hits, probs, alpha):
        """Exact one-sided Poisson-binomial test of ``hits`` identical pairs; record it, fail when rejected."""
        s = self.scenario
        res = stats.poisson_binomial_test(hits, np.clip(probs, 0.0, 1.0), alpha=alpha, alternative="greater")
        self.records.append(TestRecord(
            s.name, check, f"exact Poisson-binomial collision count ({label})", not res.rejected, alpha,
            int(probs.size), statistic=float(hits), pvalue=float(res.pvalue),
            details={"collisions": hits, "expected": float(probs.sum()), "pairs": int(probs.size)},
        ))
        if res.rejected:
            self.fail(check, f"identical inputs gave identical outputs too often across {label}: {hits} of "
                      f"{probs.size} pairs vs {probs.sum():.3g} expected under independence (p = {res.pvalue:.3g}); "
                      "the randomness is shared or does not come from the generator",
                      {"collisions": hits, "pairs": int(probs.size), "expected": float(probs.sum()),
                       "pvalue": float(res.pvalue)})

    def batch_invariance(self):
        """Rows of a large-batch scenario, one row per call: the (k, y) law must not change."""
        s = self.scenario
        tally = PitTally(s.name, "batch_invariance", bins=min(self.mode.pit_bins, 16),
                         alpha=self.ledger.spend(f"{s.name}/batch_invariance"), sequential=False)
        pit_rng = np.random.default_rng(self.rng.integers(2**63))
        budget = max(8, self.mode.max_calls // 4)
        for _ in range(max(1, budget // s.rows_per_call + 1)):
            draw = self.draw(rows=budget)
            for b in range(min(s.rows_per_call, budget)):
                one = draw.head(slice(b, b + 1))
                out = self.call(one, self.next_seed(), "batch_invariance")
                if out is None:
                    return
                step = parse_step(out, one.draft_token_ids)
                if step.final[0] < 0:
                    continue
                law = _path_step_law(_acceptance(one.draft_token_ids, one.draft_probs, one.target_probs),
                                     one.draft_probs, one.target_probs).reshape(1, -1)
                try:
                    tally.add(step.accepted * s.vocab_size + step.final, law, pit_rng)
                except ValueError as exc:
                    self.fail("impossible", f"single-row call produced an impossible outcome: {exc}")
                    return
            budget -= min(s.rows_per_call, budget)
            if budget <= 0:
                break
        record = tally.record(extra_details={"rows_per_call": 1})
        self.records.append(record)

    # -- verdicts ------------------------------------------------------------------------------------
    def classify(self):
        records = [r for r in self.records if r.check in _OUTPUT_LAW_CHECKS + ("accepted_count", "efficiency")]
        output_law_bad = [r for r in records if r.check in _OUTPUT_LAW_CHECKS and not r.passed]
        acceptance_bad = [r for r in records if r.check in ("accepted_count", "efficiency") and not r.passed]
        measured = self.accepted_total / max(self.samples, 1)
        optimal = self.accepted_expected / max(self.samples, 1)
        for r in output_law_bad:
            self.fail(r.check, f"the output law differs from the exact law ({r.method}): p = {r.pvalue:.3g}"
                      + (f", e-value {r.evalue:.3g}" if r.evalue is not None else "")
                      + f", plug-in TV {r.tv_plugin:.3g} over {r.n:,} samples",
                      {"pvalue": r.pvalue, "evalue": r.evalue, "n": r.n, "worst_cells": r.details.get("worst_cells", []),
                       "tv_plugin": r.tv_plugin})
        if acceptance_bad:
            if not output_law_bad and measured < optimal:
                self.fail("efficiency", f"lossless but inefficient: accepts {measured:.4f} drafts per step where the "
                          f"standard rule accepts {optimal:.4f} (sum min(p, q) along each path)",
                          {"accepted_per_step": measured, "optimal": optimal,
                           "pvalues": [r.pvalue for r in acceptance_bad]}, kind="inefficiency")
            else:
                for r in acceptance_bad:
                    self.fail(r.check, f"the accepted-count law differs from the exact one: accepts {measured:.4f} "
                              f"drafts per step, exact {optimal:.4f} (p = {r.pvalue:.3g})",
                              {"accepted_per_step": measured, "optimal": optimal, "pvalue": r.pvalue})
        if self.bonus_missing:
            self.fail("efficiency", f"{self.bonus_missing} fully accepted step(s) emitted no bonus token: lossless, but "
                      "one token per fully accepted step is thrown away", {"rows_without_bonus": self.bonus_missing},
                      kind="inefficiency")

    def make_summary(self, elapsed):
        s = self.scenario
        probs, repeats = self.first_accept_probs() if self.first_accept_groups else (np.zeros(0), np.zeros(0))
        trials = int(repeats.sum())
        n = max(self.samples, 1)
        return ScenarioSummary(
            name=s.name, description=s.description, vocab_size=s.vocab_size, gamma=s.gamma,
            rows_per_call=s.rows_per_call, calls=self.calls, samples=self.samples,
            acceptance_measured=(self.first_accepted / trials) if trials else None,
            acceptance_expected=float(probs @ repeats / trials) if trials else None,
            tokens_per_step_measured=self.emitted_total / n,
            tokens_per_step_expected=1.0 + self.accepted_expected / n,
            elapsed_s=elapsed, stopped_early=bool(self.stopped),
        )


def _scenario_run(sampler, scenario, *args):
    """The run for one scenario: the screen has its own loop (:mod:`._screen_run`)."""
    if isinstance(scenario, VerifierScreen):
        from ._screen_run import ScreenRun

        return ScreenRun(sampler, scenario, *args)
    return _ScenarioRun(sampler, scenario, *args)
