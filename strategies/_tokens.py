"""Token-sampler tables: a few rows of logits over a small vocabulary with per-row sampling parameters.

Logits are small integers halved, so exact ties (at the top-k and top-p boundaries, among the largest logits)
are common and shrink away; parameters are drawn from short lists whose first entry turns the step off, so a
failing example shrinks towards the plainest row that still fails.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from specdec_check.exact import TokenProcessing
from specdec_check.scenarios import TokenScenario

__all__ = ["token_tables"]

#: Outputs per call of a drawn table: enough pairs for the randomness properties, a cheap call.
TABLE_ROWS_PER_CALL = 4096


@st.composite
def token_tables(draw, processing: TokenProcessing = TokenProcessing(), *, max_rows: int = 4,
                 max_vocab: int = 8) -> TokenScenario:
    """A :class:`~specdec_check.scenarios.TokenScenario` for ``processing``: 1 to ``max_rows`` rows over 2 to
    ``max_vocab`` tokens; temperature 1 / 0.5 / 2 (and 0, greedy, where the processing has a temperature),
    top_k 0 (off) to V, top_p 1.0 / 0.9 / 0.6 / 0.3, min_p 0 / 0.1 / 0.5 for the steps it applies."""
    if not (1 <= max_rows and 2 <= max_vocab):
        raise ValueError(f"need max_rows >= 1 and max_vocab >= 2; got {max_rows}, {max_vocab}.")
    vocab = draw(st.integers(2, max_vocab))
    rows = draw(st.integers(1, max_rows))
    logits = np.array(draw(st.lists(st.lists(st.integers(-6, 6), min_size=vocab, max_size=vocab),
                                    min_size=rows, max_size=rows)), dtype=float) / 2.0
    values = logits
    if processing.inputs == "probs":
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        values = e / e.sum(axis=1, keepdims=True)
    choices = {"temperature": [1.0, 0.5, 2.0] + ([0.0] if processing.greedy else []),
               "top_k": list(range(vocab + 1)), "top_p": [1.0, 0.9, 0.6, 0.3], "min_p": [0.0, 0.1, 0.5]}
    params = {step: [draw(st.sampled_from(choices[step])) for _ in range(rows)] for step in processing.order}
    return TokenScenario("hypothesis", values, params, processing, rows_per_call=TABLE_ROWS_PER_CALL,
                         description=f"{rows} drawn row(s) of V = {vocab}")
