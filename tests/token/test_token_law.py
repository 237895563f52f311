"""The token sampler's exact law (specdec_check.exact._token_law): boundaries, ties, and agreement with an
implementation written independently (the numpy reference's processed_probs)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specdec_check.exact import TokenProcessing, token_laws
from specdec_check.samplers._token_numpy import processed_probs

PROBS = TokenProcessing(inputs="probs", order=("top_k", "top_p", "min_p"))


def _law(values, processing, **params):
    return token_laws(np.asarray(values, dtype=float), processing=processing, **params)


@pytest.mark.parametrize("ties, law, support, ambiguous", [
    ("keep", [0.4, 0.3, 0.3, 0.0], [1, 1, 1, 0], False),
    ("low_index", [4 / 7, 3 / 7, 0.0, 0.0], [1, 1, 0, 0], False),
    ("high_index", [4 / 7, 0.0, 3 / 7, 0.0], [1, 0, 1, 0], False),
    ("any", [4 / 7, 3 / 7, 0.0, 0.0], [1, 1, 1, 0], True),
])
def test_flashinfer_3774s_row_under_each_tie_rule(ties, law, support, ambiguous):
    # [0.4, 0.3, 0.3, 0] at top_k = 2: which tied token is kept is the declared rule's decision.
    laws = _law([[0.4, 0.3, 0.3, 0.0]], TokenProcessing(inputs="probs", order=("top_k",), ties=ties), top_k=[2])
    assert np.allclose(laws.law[0], law) and laws.support[0].astype(int).tolist() == support
    assert bool(laws.ambiguous[0]) is ambiguous


def test_mass_exactly_at_top_p_leaves_the_next_token_out_and_a_margin_keeps_it():
    laws = _law([[0.5, 0.25, 0.125, 0.0625, 0.0625]] * 2, PROBS, top_k=[0, 0], top_p=[0.75, 0.8], min_p=[0, 0])
    assert np.allclose(laws.law[0], [2 / 3, 1 / 3, 0, 0, 0])  # 0.5 + 0.25 reaches 0.75: the third token is out
    assert np.allclose(laws.law[1], [4 / 7, 2 / 7, 1 / 7, 0, 0])  # 0.8: the third token crosses it, and is kept
    assert not laws.ambiguous.any()


def test_ties_at_the_top_p_boundary_follow_the_declared_rule():
    # Four of 0.125 after 0.5; top_p 0.7 is crossed by the second of them: keep all four, or two by index.
    row = [[0.5, 0.125, 0.125, 0.125, 0.125]]
    keep = _law(row, PROBS, top_k=[0], top_p=[0.7], min_p=[0.0])
    low = _law(row, TokenProcessing(inputs="probs", order=("top_p",), ties="low_index"), top_p=[0.7])
    assert np.allclose(keep.law[0], row[0]) and np.allclose(low.law[0], [2 / 3, 1 / 6, 1 / 6, 0, 0])


def test_min_p_exactly_at_a_token_keeps_it():
    laws = _law([[0.5, 0.25, 0.25, 0.0]], PROBS, top_k=[0], top_p=[1.0], min_p=[0.5])
    assert np.allclose(laws.law[0], [0.5, 0.25, 0.25, 0.0]) and not laws.ambiguous[0]


def test_a_margin_within_rounding_is_ambiguous_and_its_support_takes_both_readings():
    # 0.75 + 1e-9: a float32 kernel can read the boundary either way.
    laws = _law([[0.5, 0.25 + 1e-9, 0.125, 0.125 - 1e-9]], PROBS, top_k=[0], top_p=[0.75], min_p=[0.0])
    assert laws.ambiguous[0] and "top-p boundary within rounding" in laws.reasons[0]
    assert laws.support[0, :3].all()


@pytest.mark.parametrize("rule, token", [("low_index", 1), ("high_index", 4)])
def test_greedy_rows_take_the_argmax_of_the_raw_logits_with_the_declared_tie_rule(rule, token):
    processing = TokenProcessing(ties={"greedy": rule})
    laws = _law([[1.0, 3.0, 3.0, 0.5, 3.0]], processing, temperature=[0.0], top_k=[2], top_p=[0.5])
    assert laws.law[0].argmax() == token and laws.law[0].max() == 1.0


def test_bad_inputs_are_errors_naming_what_is_wrong():
    with pytest.raises(ValueError, match=r"logits\[0, 1\] is nan; logits must be finite"):
        _law([[0.0, np.nan]], TokenProcessing(), temperature=[1.0], top_k=[0], top_p=[1.0])
    with pytest.raises(ValueError, match="top_p must hold one value per row"):
        _law([[0.0, 1.0]], TokenProcessing(), temperature=[1.0], top_k=[0], top_p=[1.5])
    with pytest.raises(ValueError, match="applies no temperature"):
        TokenProcessing(inputs="probs", order=("temperature",))
    with pytest.raises(ValueError, match="greedy ties cannot be 'keep'"):
        TokenProcessing(ties={"greedy": "keep"})


rows = st.integers(2, 12).flatmap(lambda v: st.lists(
    st.tuples(st.lists(st.integers(-6, 6), min_size=v, max_size=v),  # integer logits: ties are common
              st.sampled_from([0.0, 0.5, 1.0, 2.0]), st.integers(0, v), st.sampled_from([1.0, 0.9, 0.6, 0.3]),
              st.sampled_from([0.0, 0.1, 0.5])), min_size=1, max_size=4))


@given(rows)
def test_the_oracle_agrees_with_the_independently_written_reference(drawn):
    # Ties kept, temperature then top-k, top-p, min-p: the oracle (two readings, a total order) and the
    # reference (a sort per step) are written differently and must give the same law on every row.
    logits = np.array([r[0] for r in drawn], dtype=float) / 2.0
    t, k, p, m = (np.array([r[i] for r in drawn]) for i in range(1, 5))
    processing = TokenProcessing(order=("temperature", "top_k", "top_p", "min_p"))
    laws = token_laws(logits, processing=processing, temperature=t, top_k=k, top_p=p, min_p=m)
    reference = processed_probs(logits, t, k, p, m)
    determined = ~laws.ambiguous
    assert np.allclose(laws.law[determined], reference[determined], atol=1e-12)
    assert (laws.support >= (reference > 0)).all()  # an ambiguous row's support holds the reference's reading
