"""The law tests of a decode loop: the joint law of what it generates, or its marginals and pairs."""

from __future__ import annotations

import numpy as np

from ...exact import joint, marginals, pair_marginals
from ..core.kind import PlannedTest
from ..core.planning import planned_samples
from ..core.tally import CountTally, law_evidence
from ..checks.base import Check

__all__ = ["GeneratorLaws", "PAIR_SUPPORT_CAP"]

#: Support size the planner assumes for a decode-loop law test: the joint over V^L outcomes is
#: pooled on expected counts, so planning for more than 64 cells would only cost samples.
PAIR_SUPPORT_CAP = 64


class GeneratorLaws(Check):
    """The exact joint law of the generated tokens where enumerable (:func:`exact.joint`), otherwise
    every per-position and adjacent-pair law (:func:`exact.marginals`, :func:`exact.pair_marginals`),
    mixed over the scenario's prompts (each row picks one at random)."""

    power = "identity tests sized by samples_for(design TV, min(64, V^2) cells, alpha share), capped by the mode"

    @classmethod
    def plan(cls, scenario, options) -> list:
        selection = options.checks
        tests = []
        if scenario.enumerable:
            if "joint" in selection:
                tests.append(PlannedTest("joint", "joint"))
        else:
            if "marginals" in selection:
                tests += [PlannedTest(f"marginals[{t}]", "marginals") for t in range(scenario.max_new_tokens)]
            if "pairs" in selection:
                tests += [PlannedTest(f"pairs[{t}]", "pairs") for t in range(scenario.max_new_tokens - 1)]
        return tests

    def __init__(self, ctx, caller, counts):
        super().__init__(ctx, caller, counts)
        self.tallies = {}  # name -> (tally, codes(index, out))

    def calls_planned(self) -> int:
        """Calls until every law test can detect the design TV, within the mode's caps; call after :meth:`start`.

        Each test is planned as if its law were uniform on its support (the number of outcomes of
        positive probability): the identity test's weighting makes a skewed law no harder to test
        than the uniform law on as many cells (Valiant & Valiant 2017), and the uniform plan is
        memoised, where planning on each exact law costs seconds per test.
        """
        s, mode = self.ctx.scenario, self.ctx.mode
        alpha = self.ctx.ledger.per_check / 2  # the fixed-n half of each test's share
        supports = [max(2, int(np.count_nonzero(tally.probs))) for tally, _ in self.tallies.values()]
        if not supports:
            supports = [min(PAIR_SUPPORT_CAP, max(2, s.vocab_size ** min(s.max_new_tokens, 2)))]
        n_target = max(planned_samples(mode.design_tv, support, alpha) for support in set(supports))
        return int(max(1, min(mode.max_law_calls, -(-min(n_target, mode.max_samples) // s.rows_per_call))))

    def start(self) -> None:
        ctx, s = self.ctx, self.ctx.scenario
        n_prompts, vocab, length = s.prompts.shape[0], s.vocab_size, s.max_new_tokens
        clean = [p[p >= 0] for p in s.prompts]
        law_target = ctx.backend.law_model(s.target)  # the laws the sampler sees (low-precision casts)
        if "joint" in ctx.planned:
            law = np.concatenate([joint(law_target, length, p).reshape(-1) for p in clean]) / n_prompts

            def joint_codes(index, out):
                code = np.zeros(out.shape[0], dtype=np.int64)
                for t in range(length):
                    code = code * vocab + out[:, t]
                return index * vocab**length + code

            def joint_name(code):
                prompt, string = divmod(code, vocab**length)
                tokens = [(string // vocab**(length - 1 - t)) % vocab for t in range(length)]
                return f"prompt {prompt} {clean[prompt].tolist()}, generated tokens {tokens}"

            self.tallies["joint"] = (CountTally(s.name, "joint", law, alpha=ctx.spend("joint"), describe=joint_name),
                                     joint_codes)
        if any(test.check == "marginals" for test in ctx.plan.tests):
            margs = np.stack([marginals(law_target, length, p) for p in clean]) / n_prompts  # [P, T, V]
            for t in range(length):
                self.tallies[f"marginals[{t}]"] = (
                    CountTally(s.name, "marginals", margs[:, t].reshape(-1), alpha=ctx.spend(f"marginals[{t}]"),
                               describe=lambda code, t=t: (f"prompt {code // vocab} {clean[code // vocab].tolist()}, "
                                                           f"token {code % vocab} at position {t}")),
                    lambda index, out, t=t: index * vocab + out[:, t])
        if any(test.check == "pairs" for test in ctx.plan.tests):
            pairs = np.stack([pair_marginals(law_target, length, p) for p in clean]) / n_prompts  # [P, T-1, V, V]
            for t in range(length - 1):
                self.tallies[f"pairs[{t}]"] = (
                    CountTally(s.name, "pairs", pairs[:, t].reshape(-1), alpha=ctx.spend(f"pairs[{t}]"),
                               describe=lambda code, t=t: (f"prompt {code // vocab**2} {clean[code // vocab**2].tolist()}, "
                                                           f"tokens ({code // vocab % vocab}, {code % vocab}) at "
                                                           f"positions {t} and {t + 1}")),
                    lambda index, out, t=t: (index * vocab + out[:, t]) * vocab + out[:, t + 1])

    def absorb(self, step) -> bool:
        """One call's generated tokens (``step.out``) from the prompts ``step.block`` (their indices)."""
        for tally, codes in self.tallies.values():
            tally.add_codes(codes(step.block, step.out))
        return True

    @property
    def rejected_early(self) -> bool:
        return any(tally.rejected_early for tally, _ in self.tallies.values())

    def finish(self) -> None:
        recorder = self.ctx.recorder
        for name, (tally, _) in self.tallies.items():
            rec = tally.record(extra_details={"position": name})
            recorder.record(rec)
            if not rec.passed:
                recorder.failure(rec.check, f"the generated {name} law differs from the target's exact law: p = "
                                 f"{rec.pvalue:.3g}" + (f", e-value {rec.evalue:.3g}" if rec.evalue is not None else "")
                                 + f", plug-in TV {rec.tv_plugin:.3g} over {rec.n:,} sequences" + law_evidence(rec),
                                 {"pvalue": rec.pvalue, "n": rec.n, "worst_cells": rec.details.get("worst_cells", [])})
