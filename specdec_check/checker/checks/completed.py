"""The rule-agnostic exactness test: one step, completed by the exact target, against the target's law.

One verifier step emits ``O = (x_1..x_k, y)``. A decode loop built from steps is exact iff each
step, followed by exact sampling from the target, yields a target-distributed sequence
(/work/shared/research/rules.md section 1; Leviathan et al. 2023 prove it for the standard
rule, Sun et al. 2025 for block verification). So each fresh step is completed to
``L = gamma + 1`` tokens from the exact target (:func:`specdec_check.samplers.complete_with_target`)
and the completed sequence is tested against the target's law, whatever the rule:

- ``completed_pit``: the randomized PIT of every position under its exact target conditional
  given the realized prefix (the Rosenblatt transform, :func:`~specdec_check.samplers.rosenblatt_pit`;
  Rosenblatt 1952, Brockwell 2007) is i.i.d. Uniform(0, 1) under exactness: the L values of
  every row are pooled in one histogram;
- ``completed_pairs``: adjacent positions' PIT values on an 8 x 8 grid, uniform under exactness
  (a rule that couples positions without moving their marginals is seen here);
- ``completed_law``: where the outcomes can be enumerated, the completed sequence (with its
  context) against the exact target joint law.

Only the first call on each block of drafts counts: given its drafts, a step's law is not the
target's (the drafts are part of the randomness the theorem integrates over).
"""

from __future__ import annotations

import numpy as np

from ... import stats
from ...exact import target_completed_law
from ...samplers import complete_with_target, rosenblatt_pit
from ..core.kind import PlannedTest
from ..core.planning import planned_samples
from ..core.tally import CountTally, PitTally
from .base import Check

__all__ = ["CompletedLaw", "PAIR_GRID", "completed_tv_bounds", "rule_agnostic_diagnosis"]

#: Cells per axis of the adjacent-pair test: 8 x 8 = 64 equal cells (a few thousand pairs fill them).
PAIR_GRID = 8
#: Largest (contexts x V^L) joint the completed-law identity test enumerates (as the step law's).
MAX_COMPLETED_CELLS = 200_000


def _completed_cells(scenario) -> int:
    length = scenario.gamma + 1
    contexts = scenario.rows_per_call if scenario.fixed_target_probs is not None else scenario.prompt_pool
    return contexts * scenario.vocab_size**length


def completed_tv_bounds(record, *, delta: float) -> dict:
    """Certified bounds on the TV between the completed law and the target's, from one rejected record:
    ``tv_lower = max(0, plug-in TV - r)`` with ``r`` the deviation radius of the empirical law
    (:func:`specdec_check.stats.tv_deviation_radius`; the binned law's TV is at most the law's, by
    data processing), and, for the enumerated law, ``tv_upper`` (:func:`specdec_check.stats.tv_upper_bound`)."""
    cells = record.bins or 1
    radius = float(stats.tv_deviation_radius(record.n, cells, delta)) if record.n else 1.0
    lower = max(0.0, float(record.tv_plugin or 0.0) - radius)
    bounds = {"tv_lower": lower, "confidence": 1.0 - delta}
    if record.details.get("law") == "completed" and record.tv_upper is not None:
        bounds["tv_upper"] = float(record.tv_upper)
    return bounds


def rule_agnostic_diagnosis(records, failures, design_tv: float) -> tuple:
    """``(text, evidence)``: what a rule-agnostic run (the ``completed`` records and the failures of a run
    under rule="any" on a scenario that failed under the standard rule) says about the output law:
    lossy (with certified TV bounds), no loss detected (at its resolution, when that reaches the mode's
    ``design_tv``), inconclusive (a coarser resolution), or not run."""
    records = [r for r in records if r.check == "completed"]
    failures = [f for f in failures if f.kind == "failure"]
    if failures and not records:
        return f"the rule-agnostic test could not run: {failures[0].message}", {"verdict": "not run"}
    if any(not r.passed for r in records):
        worst = max((r for r in records if not r.passed), key=lambda r: r.details.get("tv_lower", 0.0))
        lower, upper = worst.details.get("tv_lower", 0.0), worst.details.get("tv_upper")
        bound = (f"TV at least {lower:.3g}" if lower > 0 else "its TV not yet bounded away from 0 at this sample size")
        if upper is not None:
            bound += f", at most {upper:.3g}"
        return (f"the completed output law differs from the target's (rule-agnostic test, p = {worst.pvalue:.3g}; "
                f"{bound}, each at confidence 1 - {worst.alpha:.2g})",
                {"verdict": "lossy", "tv_lower": lower, "tv_upper": upper, "pvalue": worst.pvalue})
    resolution = min((r.min_detectable_tv for r in records if r.min_detectable_tv is not None), default=None)
    if resolution is None or resolution > design_tv:
        return (f"the rule-agnostic test detected no loss, but its resolution (TV {resolution or 1.0:.3g}) is short of "
                f"the mode's design TV {design_tv:.3g}: it cannot tell whether another lossless rule is implemented",
                {"verdict": "inconclusive", "resolution": resolution})
    return (f"the rule-agnostic test detected no loss at TV resolution {resolution:.3g}: if this verifier implements "
            "another lossless rule (block verification, sampled match, ...), check it with rule='any' (--rule any)",
            {"verdict": "no loss detected", "resolution": resolution})


class CompletedLaw(Check):
    """The completed-sequence tests (see the module docstring); selected by the ``completed`` check."""

    power = ("randomized PIT of all L = gamma + 1 completed positions pooled, sized by samples_for(design TV, "
             "pit bins, alpha share); adjacent pairs on an 8 x 8 grid; the enumerated completed law where it fits")

    @classmethod
    def plan(cls, scenario, options) -> list:
        if "completed" not in options.checks:
            return []
        tests = [PlannedTest("completed_pit", "completed")]
        if scenario.gamma >= 1:
            tests.append(PlannedTest("completed_pairs", "completed"))
        if _completed_cells(scenario) <= MAX_COMPLETED_CELLS:
            tests.append(PlannedTest("completed_law", "completed"))
        return tests

    merged = True

    def __init__(self, ctx, caller, counts):
        super().__init__(ctx, caller, counts)
        self.pit = self.pairs = self.law = None
        self.rng = None
        self.length = ctx.scenario.gamma + 1

    def calls_needed(self, reuse: int) -> int:
        """Calls until the pooled PIT test can detect the design TV: each fresh row gives L values."""
        if "completed_pit" not in self.ctx.planned:
            return 0
        s, mode = self.ctx.scenario, self.ctx.mode
        n = min(planned_samples(mode.design_tv, mode.pit_bins, self.ctx.ledger.per_check / 2), mode.max_samples)
        return -(-n * reuse // (s.rows_per_call * self.length))

    def start(self) -> None:
        ctx, s = self.ctx, self.ctx.scenario
        planned = ctx.planned
        looks = not ctx.part  # a later shard's tallies only count: it cannot see the e-process before it
        tv = ctx.mode.design_tv  # the e-process keeps its power down to the design TV
        if "completed_pit" in planned:
            self.pit = PitTally(s.name, "completed", bins=ctx.mode.pit_bins, alpha=ctx.spend("completed_pit"),
                                sequential=looks, resolution=tv)
            self.pit.method = "Rosenblatt PIT of the completed sequence, positions pooled"
        if "completed_pairs" in planned:
            self.pairs = CountTally(s.name, "completed", np.full(PAIR_GRID**2, 1.0 / PAIR_GRID**2),
                                    alpha=ctx.spend("completed_pairs"), sequential=looks, resolution=tv)
            self.pairs.method = f"adjacent completed positions' PIT values on a {PAIR_GRID} x {PAIR_GRID} grid"
        if "completed_law" in planned:
            if s.fixed_target_probs is not None:
                rows = ctx.backend.law_rows(s.fixed_target_probs)
                law = target_completed_law(target_probs=rows).reshape(-1) / rows.shape[0]
            else:
                target = ctx.backend.law_model(s.target)
                law = np.concatenate([target_completed_law(target=target, gamma=s.gamma, prompt=p[p >= 0]).reshape(-1)
                                      for p in self.caller.pool]) / len(self.caller.pool)
            self.law = CountTally(s.name, "completed", law, alpha=ctx.spend("completed_law"), sequential=looks,
                                  resolution=tv)
            self.law.method = "completed sequence against the exact target joint (context, L tokens)"
        if self.pit is not None or self.pairs is not None or self.law is not None:
            self.rng = np.random.default_rng(ctx.rng.integers(2**63))

    @property
    def rejected_early(self) -> bool:
        return any(t is not None and t.rejected_early for t in (self.pit, self.pairs, self.law))

    def _conditionals(self, draw) -> dict:
        s, backend = self.ctx.scenario, self.ctx.backend
        if s.fixed_target_probs is not None:
            return {"target_probs": draw.target_probs}
        return {"target": backend.law_model(s.target), "prompts": self.caller.pool[draw.pool_index]}

    def absorb(self, step) -> bool:
        if self.rng is None or not step.fresh:
            return True
        return self.absorb_emitted(step.out if step.host else self.ctx.backend.to_host(step.out), step.block.draw)

    def absorb_emitted(self, out, draw) -> bool:
        """Complete, transform and count one fresh call's emitted tokens ``out`` (host int [B, m], -1 padded)
        drawn from ``draw`` (its ``pool_index``; its ``target_probs`` for fixed rows); False after a finding.
        Any sampler kind whose step emits tokens of one sequence feeds this (chains, trees)."""
        if self.rng is None:
            return True
        ctx, s = self.ctx, self.ctx.scenario
        laws = self._conditionals(draw)
        length = None if s.fixed_target_probs is not None else self.length
        completed = complete_with_target(out, generator=self.rng, length=length, **laws)
        pit = rosenblatt_pit(completed, generator=self.rng, **laws)
        if pit.impossible:
            b, j = (int(i) for i in pit.support_violations[0])
            ctx.recorder.failure("impossible", f"row {b} emitted a token of target probability zero at position {j} "
                                 "(impossible under every lossless rule: the completed sequence has probability zero "
                                 "under the target)",
                                 {"row": b, "position": j, "output": out[b].tolist(), "completed": completed[b].tolist()},
                                 stop=True)
            return False
        if self.pit is not None:
            self.pit.add_uniforms(pit.values.reshape(-1))
        if self.pairs is not None:
            cells = np.minimum((pit.values * PAIR_GRID).astype(np.int64), PAIR_GRID - 1)
            self.pairs.add_codes((cells[:, :-1] * PAIR_GRID + cells[:, 1:]).reshape(-1))
        if self.law is not None:
            codes = np.zeros(completed.shape[0], dtype=np.int64)
            for j in range(completed.shape[1]):
                codes = codes * s.vocab_size + completed[:, j]
            self.law.add_codes(draw.pool_index * s.vocab_size**completed.shape[1] + codes)
        return True

    def evidence(self) -> dict:
        """The tallies, as one shard of the scenario hands them to the driver (:meth:`adopt` takes them back)."""
        return {"pit": self.pit, "pairs": self.pairs, "law": self.law}

    def adopt(self, evidence: dict) -> None:
        """Take the tallies merged over a scenario's shards (then :meth:`finish` records them)."""
        self.pit, self.pairs, self.law = evidence["pit"], evidence["pairs"], evidence["law"]

    def finish(self) -> None:
        ctx = self.ctx
        for tally, extra in ((self.pit, {"positions": self.length}), (self.pairs, {"grid": PAIR_GRID}),
                             (self.law, {"law": "completed"})):
            if tally is None:
                continue
            record = tally.record(extra_details=extra)
            if not record.passed:
                record.details.update(completed_tv_bounds(record, delta=record.alpha))
            ctx.recorder.record(record)
