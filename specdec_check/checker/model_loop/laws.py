"""The law tests of a decode loop on real models: every emitted token against the target's own law after its
prefix, with no enumeration of the vocabulary.

The sequential Rosenblatt transform (Rosenblatt 1952; randomized for discrete laws, Brockwell 2007) maps the
token at position ``t`` to ``u_t = F_t(x_t - 1) + U p_t(x_t)`` under the target's law ``p_t`` after the prompt and
the tokens before it, the vocabulary ranked by decreasing ``p_t`` (:func:`ranked_pit`): an exact loop gives
i.i.d. Uniform(0, 1) values at every position, whatever the model and the vocabulary. Tested: each position's values and all positions pooled (equal bins), adjacent positions'
pairs on a 4 x 4 grid (a loop whose step boundaries couple tokens), and the first token's counts per prompt
over its most probable tokens (the rest one cell). A token the processed law gives probability zero is an
impossible event: a failure at once. With a stop token, a row ends at it (the caller's contract: ``-1`` after
it); its positions are tested while it runs, and its pair after the stop is completed with an independent uniform
(see :meth:`LoopLaws.flush`). Rows are buffered and their laws computed in batches (one forward pass per
emitted sequence gives its laws at every position).
"""

from __future__ import annotations

import numpy as np

from ..checks.base import Check
from ..checks.randomness import PAIR_PIT_BINS
from ..core.kind import PlannedTest
from ..core.planning import planned_samples

from ..core.tally import CountTally, PitTally

__all__ = ["FIRST_TOKEN_CELLS", "LoopLaws", "ranked_pit"]

#: Rows whose laws are computed in one batch of forward passes.
BUFFER_ROWS = 256
#: The first token's counts keep at most this many most probable tokens per prompt (the rest: one cell).
FIRST_TOKEN_CELLS = 64


def ranked_pit(laws: np.ndarray, tokens: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """The randomized probability integral transform (Brockwell 2007) of ``tokens[t]`` under ``laws[t]``, with the
    vocabulary ordered by decreasing probability (ties by id): ``u = (P(before x) + U p(x)) / sum(p)``.

    Under the law, ``u`` is exactly Uniform(0, 1) for any ordering that the law itself fixes (Rosenblatt 1952), so
    the choice costs no calibration; it decides what the transform sees. In id order a law too peaked or too flat
    (a draft's law leaking into the output, a temperature applied twice, a residual replaced by the target's law)
    moves mass between ids scattered over [0, 1) and the equal-bin tests barely see it; ranked by probability, the
    same departure moves ``u`` monotonically towards 0 or 1. One pass over the vocabulary per position, no sort.
    """
    rows = np.arange(tokens.size)
    mass = laws[rows, tokens]
    before = (laws > mass[:, None]) | ((laws == mass[:, None]) & (np.arange(laws.shape[1]) < tokens[:, None]))
    below = np.where(before, laws, 0.0).sum(axis=1)
    return (below + uniforms * mass) / laws.sum(axis=1)


class LoopLaws(Check):
    """See the module docstring."""

    power = ("randomized-PIT identity tests per position and pooled, a 4 x 4 pair test of adjacent positions, and "
             "first-token counts per prompt, sized by samples_for(design TV, bins, alpha share), capped by the mode")

    @classmethod
    def plan(cls, scenario, options) -> list:
        tests = []
        if "positions" in options.checks:
            tests += [PlannedTest(f"position[{t}]", "positions") for t in range(scenario.max_new_tokens)]
            tests.append(PlannedTest("pooled", "positions"))
        if "pairs" in options.checks and scenario.max_new_tokens > 1:
            tests.append(PlannedTest("pairs", "pairs"))
        if "first_token" in options.checks:
            tests.append(PlannedTest("first_token", "first_token"))
        return tests

    def __init__(self, ctx, caller, counts):
        super().__init__(ctx, caller, counts)
        self.oracle = ctx.kind.oracle
        self.buffer, self.tallies = [], {}
        self.rng = np.random.default_rng(ctx.rng.integers(2**63))

    def start(self) -> None:
        ctx, s = self.ctx, self.ctx.scenario
        bins = ctx.mode.pit_bins
        for test in ctx.plan.tests:
            if test.check == "positions":
                self.tallies[test.name] = PitTally(s.name, "positions", bins=bins, alpha=ctx.spend(test.name),
                                                   resolution=ctx.mode.design_tv)
            elif test.name == "pairs":
                self.tallies["pairs"] = CountTally(s.name, "pairs", np.full(PAIR_PIT_BINS ** 2, PAIR_PIT_BINS ** -2.0),
                                                   alpha=ctx.spend("pairs"), resolution=ctx.mode.design_tv)
        if "first_token" in ctx.planned:
            laws = self.oracle.position_laws([p for p in s.prompts])
            firsts = np.stack([law[-1] for law in laws])  # the law after each whole prompt
            keep = np.argsort(-firsts, axis=1, kind="stable")[:, :FIRST_TOKEN_CELLS]
            self.first_cells = keep  # [P, k]: each prompt's most probable tokens; cell k of a prompt: the rest
            probs = np.concatenate([np.append(firsts[i, keep[i]], max(0.0, 1.0 - firsts[i, keep[i]].sum()))
                                    for i in range(len(s.prompts))]) / len(s.prompts)
            self.tallies["first_token"] = CountTally(s.name, "first_token", probs, alpha=ctx.spend("first_token"),
                                                     resolution=ctx.mode.design_tv)

    def calls_planned(self) -> int:
        ctx, s, mode = self.ctx, self.ctx.scenario, self.ctx.mode
        alpha = ctx.ledger.per_check / 2
        need = min(planned_samples(mode.design_tv, mode.pit_bins, alpha), mode.max_samples)
        return int(max(1, min(mode.max_law_calls, -(-need // s.rows_per_call))))

    def absorb(self, step) -> bool:
        index, out = step
        self.buffer += [(int(i), row) for i, row in zip(index, out)]
        if len(self.buffer) >= BUFFER_ROWS:
            return self.flush()
        return True

    def flush(self) -> bool:
        """Judge the buffered rows: impossible tokens, then every tally; False after an impossible token."""
        rows, self.buffer = self.buffer, []
        if not rows:
            return True
        s = self.ctx.scenario
        sequences = []
        for i, row in rows:
            emitted = row[row >= 0]
            sequences.append(s.prompts[i] + tuple(int(t) for t in emitted))
        laws = self.oracle.position_laws(sequences)
        by_position = [[] for _ in range(s.max_new_tokens)]
        pairs, firsts = [], []
        for (i, row), sequence, law in zip(rows, sequences, laws):
            start = len(s.prompts[i]) - 1
            emitted = row[row >= 0]
            mass = law[start + np.arange(emitted.size), emitted]
            if (mass <= 0).any():
                t = int(np.flatnonzero(mass <= 0)[0])
                self.ctx.recorder.failure(
                    "impossible", f"a row emitted token {int(emitted[t])} at position {t}, which the target's "
                    f"processed law gives probability zero there (prompt {list(s.prompts[i])}, then "
                    f"{emitted[:t].tolist()}); exact means: equal to {self.oracle.describe()}",
                    {"event": "impossible_token", "prompt": list(s.prompts[i]), "position": t,
                     "token": int(emitted[t]), "emitted": emitted.tolist()}, stop=True)
                return False
            u = np.clip(ranked_pit(law[start:start + emitted.size], emitted, self.rng.random(emitted.size)),
                        0.0, 1.0 - 1e-16)
            for t in range(emitted.size):
                by_position[t].append(u[t])
            pairs += list(zip(u[:-1], u[1:]))
            if emitted.size < s.max_new_tokens and emitted.size:
                # The row stopped at its stop token. Its last value is uniform, but a pair is only formed when the
                # next position exists, i.e. when the token was not the stop token: pairs of stopped rows alone
                # would condition u_t on "not the stop token" and bias the test against an exact loop. The
                # stopped row's next value is imputed as an independent uniform, which is its law under H0.
                pairs.append((u[-1], self.rng.random()))
            if emitted.size:
                cells = self.first_cells[i] if hasattr(self, "first_cells") else None
                if cells is not None:
                    hit = np.flatnonzero(cells == emitted[0])
                    k = cells.size
                    firsts.append(i * (k + 1) + (int(hit[0]) if hit.size else k))
        for t, values in enumerate(by_position):
            if values and f"position[{t}]" in self.tallies:
                self.tallies[f"position[{t}]"].add_uniforms(np.array(values))
        if "pooled" in self.tallies:
            pooled = np.concatenate([np.array(v) for v in by_position if v]) if any(by_position) else np.zeros(0)
            self.tallies["pooled"].add_uniforms(pooled)
        if pairs and "pairs" in self.tallies:
            a = np.minimum((np.array([p[0] for p in pairs]) * PAIR_PIT_BINS).astype(int), PAIR_PIT_BINS - 1)
            b = np.minimum((np.array([p[1] for p in pairs]) * PAIR_PIT_BINS).astype(int), PAIR_PIT_BINS - 1)
            self.tallies["pairs"].add_codes(a * PAIR_PIT_BINS + b)
        if firsts and "first_token" in self.tallies:
            self.tallies["first_token"].add_codes(np.array(firsts))
        return True

    @property
    def rejected_early(self) -> bool:
        return any(t.rejected_early for t in self.tallies.values())

    def finish(self) -> None:
        if self.ctx.stopped:
            return
        if not self.flush():
            return
        recorder = self.ctx.recorder
        for name, tally in self.tallies.items():
            rec = tally.record(extra_details={"test": name, "oracle": self.oracle.describe()})
            recorder.record(rec)
            if not rec.passed:
                what = {"pairs": "adjacent tokens' joint PIT is not uniform on the 4 x 4 grid (a token off the "
                                 "target's law at either position, or adjacent tokens dependent given their prefixes)",
                        "first_token": "the first token after each prompt does not follow the target's law",
                        "pooled": "the tokens do not follow the target's laws (PIT of every position, pooled)"}.get(
                    name, f"the token at {name.replace('[', ' ').rstrip(']')} does not follow the target's law")
                recorder.failure(rec.check, f"{what}: p = {rec.pvalue:.3g}, plug-in TV {rec.tv_plugin:.3g} over "
                                 f"{rec.n:,} tokens; exact means: equal to {self.oracle.describe()}",
                                 {"pvalue": rec.pvalue, "n": rec.n, "test": name})

