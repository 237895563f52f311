"""The output contract and the step parser against a row-by-row reference.

``check_output`` decides validity from whole-array counts (a fast path) and only names the
broken rule on a malformed output; the reference below walks each row in Python, so any
disagreement on validity, the rule named, the row named or the decoded step fails here.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec_check.checker.chain.contract import check_output, parse_step

_RULES = {
    "range": "outside [0,",
    "suffix": "token after -1 padding",
    "empty": "emitted no token at all",
    "overrun": "emits tokens after the first token that differs",
}


def _reference(out, drafts, vocab):
    """``(rule, row)`` of the first violation in the contract's order, or ``(None, steps)``."""
    for rule in ("range", "suffix", "empty", "overrun"):
        for b, (row, draft) in enumerate(zip(out.tolist(), drafts.tolist())):
            if rule == "range" and any(t < -1 or t >= vocab for t in row):
                return rule, b
            real = [t >= 0 for t in row]
            if rule == "suffix" and any(real[j + 1] and not real[j] for j in range(len(row) - 1)):
                return rule, b
            if rule == "empty" and not real[0]:
                return rule, b
            k = 0
            while k < len(draft) and row[k] == draft[k]:
                k += 1
            if rule == "overrun" and sum(real) > k + 1:
                return rule, b
    steps = []
    for row, draft in zip(out.tolist(), drafts.tolist()):
        k = 0
        while k < len(draft) and row[k] == draft[k]:
            k += 1
        steps.append((k, row[k] if row[k] >= 0 else -1, k + (row[k] >= 0)))
    return None, steps


@st.composite
def _outputs(draw):
    """Near-valid outputs: drafts, a stop, a final token or -1, padding, then a few corruptions."""
    vocab = draw(st.integers(2, 6))
    gamma = draw(st.integers(0, 5))
    batch = draw(st.integers(1, 12))  # both sides of SMALL_CALL_ROWS (int64 outputs of up to 8 rows: row by row)
    drafts = np.array(draw(st.lists(st.lists(st.integers(0, vocab - 1), min_size=gamma, max_size=gamma),
                                    min_size=batch, max_size=batch)), dtype=np.int64).reshape(batch, gamma)
    out = np.full((batch, gamma + 1), -1, dtype=np.int64)
    for b in range(batch):
        k = draw(st.integers(0, gamma))
        out[b, :k] = drafts[b, :k]
        choices = [t for t in range(vocab) if k == gamma or t != drafts[b, k]] + [-1]
        out[b, k] = draw(st.sampled_from(choices))
    for _ in range(draw(st.integers(0, 2))):
        b, j = draw(st.integers(0, batch - 1)), draw(st.integers(0, gamma))
        out[b, j] = draw(st.integers(-3, vocab + 1))
    return out, drafts, vocab


@settings(max_examples=400, deadline=None, derandomize=True)
@given(_outputs(), st.sampled_from([np.int64, np.int32, np.int8]), st.sampled_from(["C", "F", "strided"]))
def test_check_output_agrees_with_the_row_by_row_reference(case, dtype, layout):
    out, drafts, vocab = case
    out = out.astype(dtype)
    if layout == "F":
        out = np.asfortranarray(out)
    elif layout == "strided":
        wide = np.zeros((out.shape[0], 2 * out.shape[1]), dtype=dtype)
        wide[:, ::2] = out
        out = wide[:, ::2]
    problem, step = check_output(out, drafts, vocab)
    rule, detail = _reference(out, drafts, vocab)
    if rule is None:
        assert problem is None
        got = list(zip(step.accepted.tolist(), step.final.tolist(), step.emitted.tolist()))
        assert got == detail
    else:
        assert step is None and _RULES[rule] in problem[0]
        assert problem[1]["row"] == detail


@pytest.mark.parametrize("row, rule", [
    ([5, 1, 2], "range"),
    ([-2, -1, -1], "range"),
    ([-1, 1, -1], "suffix"),
    ([-1, -1, -1], "empty"),
    ([1, 0, 0], "overrun"),
    ([0, 3, 0], "overrun"),
])
def test_each_contract_rule_is_named_with_its_row(row, rule):
    drafts = np.array([[1, 2], [1, 2]])
    out = np.array([[1, 2, 3], row])
    problem, step = check_output(out, drafts, 5)
    assert step is None and _RULES[rule] in problem[0] and problem[1]["row"] == 1


def test_drafts_outside_the_vocabulary_are_named_not_a_crash():
    problem, step = check_output(np.array([[0, -1, -1]]), np.array([[0, -1]]), 5)
    assert step is None and "draft ids must lie in [0, 5)" in problem[0] and problem[1]["row"] == 0


def test_parse_step_decodes_stops_final_tokens_and_missing_bonus():
    drafts = np.array([[1, 2, 3]] * 4)
    out = np.array([[1, 2, 3, 4], [1, 0, -1, -1], [4, -1, -1, -1], [1, 2, 3, -1]])
    step = parse_step(out, drafts)
    assert step.accepted.tolist() == [3, 1, 0, 3]
    assert step.final.tolist() == [4, 0, 4, -1]
    assert step.emitted.tolist() == [4, 2, 1, 3]


@pytest.mark.parametrize("stop", [0, 1, 2])
def test_a_row_that_stops_without_its_final_token_is_named_at_every_position(stop):
    """A rejection at any draft position, the last one included, must emit a recovered token: a row of
    ``stop`` accepted drafts then padding is the dropped-final event (gamma = 3, so stop 2 is the last)."""
    from specdec_check.checker.chain.contract import dropped_final, parse_step

    drafts = np.array([[4, 5, 6], [4, 5, 6]])
    out = np.array([[4, 5, 6, 1], [4, 5, 6, 1]])  # row 0 fully accepted with its bonus
    out[1, stop:] = -1
    found = dropped_final(parse_step(out, drafts), drafts, out)
    assert found is not None and found[1]["event"] == "dropped_final" and found[1]["row"] == 1
    whole = np.array([[4, 5, 6, -1]])  # every draft accepted, no bonus: lossless (an inefficiency), not this event
    assert dropped_final(parse_step(whole, drafts[:1]), drafts[:1], whole) is None
