"""``specdec-check demo``: the corpus-bigram example, from the oracles and from numpy_generate."""

from __future__ import annotations

import sys

import numpy as np

from . import exact
from .samplers import numpy_generate
from .scenarios import corpus_bigram

__all__ = ["DEMO_WEIGHTS", "run_demo"]

DEMO_WEIGHTS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)
DEMO_GAMMA = 4


def _measured_tokens_per_step(target, draft, *, tokens: int, seed: int) -> float:
    """Tokens per step of numpy_generate over about ``tokens`` generated tokens (one step = one target call)."""
    rows_scored = 0

    def scoring(batch):
        nonlocal rows_scored
        rows_scored += batch.shape[0]
        return target(batch)

    chains = max(1, min(1000, tokens // 200))  # about 200 tokens per chain keeps the truncation effect small
    length = max(1, tokens // chains)
    generator = np.random.default_rng(seed)
    out = numpy_generate(target=scoring, draft=draft, prompts=np.full((chains, 1), -1), max_new_tokens=length,
                         gamma=DEMO_GAMMA, generator=generator)
    # Every chain is scored once per step while it is active, so tokens / rows scored is tokens per step
    # (slightly below the stationary value: the last step of each chain is cut at max_new_tokens).
    return out.size / rows_scored


def run_demo(*, tokens: int = 200_000, seed: int = 0, out=None) -> int:
    """Print alpha, Equation 1, the Theorem 3.8 speedups and measured tokens per step for each w."""
    out = sys.stdout if out is None else out
    print(f"corpus-bigram example (V=18), gamma={DEMO_GAMMA}; measured over {tokens:,} tokens of numpy_generate",
          file=out)
    print("| w | alpha | E[tokens/step] (Eq. 1) | speedup c=0.1 | speedup c=0.25 | measured tokens/step |", file=out)
    print("|---|---|---|---|---|---|", file=out)
    for w in DEMO_WEIGHTS:
        target, draft = corpus_bigram(w)
        alpha = exact.acceptance_rate(target, draft)
        eq1 = exact.expected_tokens_per_step(alpha, DEMO_GAMMA)
        s1 = exact.expected_speedup(alpha, DEMO_GAMMA, 0.1)
        s2 = exact.expected_speedup(alpha, DEMO_GAMMA, 0.25)
        measured = _measured_tokens_per_step(target, draft, tokens=tokens, seed=seed)
        print(f"| {w:g} | {alpha:.4f} | {eq1:.4f} | {s1:.4f} | {s2:.4f} | {measured:.4f} |", file=out)
    return 0
