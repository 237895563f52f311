"""Default-mode mutation score: every catalogued bug is detected, every control passes (fixed seed).

One test per entry so the time per entry is visible (``pytest --durations=0``).
"""

from __future__ import annotations

import pytest

from specdec_check import check_generator, check_verifier  # noqa: F401  (the checker must exist)
from specdec_check.bugs import catalogue, format_mutation_table, mutation_score

SEED = 0


@pytest.mark.parametrize("e", catalogue(), ids=lambda e: e.name)
def test_entry_in_default_mode(e):
    score = mutation_score("default", seed=SEED, names=[e.name])
    (row,) = score.rows
    table = format_mutation_table(score)
    if e.expected == "pass":
        assert not row.detected, table
    else:
        assert row.detected, table
        allowed = ("failure", "inefficiency", "error") if e.expected == "inefficiency" else ("failure", "error")
        assert row.outcome in allowed, table
    assert row.ok and score.exit_code == 0, table


def test_table_and_exit_code_shape():
    score = mutation_score("quick", seed=SEED, names=["resample_from_target", "control_gumbel_residual"])
    table = format_mutation_table(score)
    assert table.count("\n| ") >= 3 and "resample_from_target" in table
    assert score.exit_code in (0, 1)
