"""Block verification's weights with the residual masses at weight 1 read from the law tables (issue 31) are the
weights computed from the rows, to the bit: every field of :class:`~specdec_check.exact.kernels.BlockWeights`, on
the default battery's keyed scenarios (V = 7 to 32,000, gamma 1 to 7), on float32 tables, and on rows whose weights
are NaN or below 1 at every position."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_check.checker.chain.block import UNIT_RESIDUAL_MIN_VOCAB, VerifierBlock
from specdec_check.exact.kernels import UNIT_MASS_MIN_SHARE, block_weights
from specdec_check.scenarios import LawTables, VerifierDraw, default_verifier_battery

FIELDS = ("weights", "residual_mass", "stop_probs", "accepted_count_law")
KEYED = [s for s in default_verifier_battery() if getattr(s, "table_rows", None) is not None]


def _same(full, unit) -> None:
    for field in FIELDS:
        a, b = getattr(full, field), getattr(unit, field)
        assert a.dtype == b.dtype and a.shape == b.shape, field
        assert np.array_equal(a.view(np.uint64), b.view(np.uint64)), f"{field} differs in its bits"


@pytest.mark.parametrize("scenario", KEYED, ids=[s.name for s in KEYED])
def test_table_masses_give_the_same_weights_bit_for_bit(scenario):
    rng = np.random.default_rng(11)
    tables = scenario.law_tables()
    calls = 1 if scenario.vocab_size > 2000 else max(1, 2048 // scenario.rows_per_call)
    draw = scenario.draw(rng, pool=scenario.prompts(), tables=tables, calls=calls)
    gamma, keys = scenario.gamma, draw.context_keys
    full = block_weights(draw.draft_token_ids, draw.draft_probs, draw.target_probs)
    unit = block_weights(draw.draft_token_ids, draw.draft_probs, draw.target_probs,
                         tables.residual_mass[keys[:, :gamma]])
    _same(full, unit)
    assert (full.weights[:, 0] == 1.0).all()  # position 0: always read from the table


def _draw(name, seed, calls):
    scenario = next(s for s in KEYED if s.name == name)
    tables = scenario.law_tables()
    draw = scenario.draw(np.random.default_rng(seed), pool=scenario.prompts(), tables=tables, calls=calls)
    return draw, tables, scenario.gamma


def test_both_paths_are_taken_and_a_wrong_table_is_seen():
    """The test above can fail: the masses read where the weight is 1 are the table's (a table off by one ulp
    changes exactly those), and the others are summed from the rows (a table of NaN changes none of them)."""
    draw, tables, gamma = _draw("large-vocabulary", 5, 1)
    ids, keys = draw.draft_token_ids, draw.context_keys
    full = block_weights(ids, draw.draft_probs, draw.target_probs)
    ones = full.weights[:, :gamma] == 1.0
    assert UNIT_MASS_MIN_SHARE <= ones.mean() < 1.0  # the masses are used, and some rows are summed
    nudged = np.nextafter(tables.residual_mass, np.inf)[keys[:, :gamma]]
    changed = block_weights(ids, draw.draft_probs, draw.target_probs, nudged).residual_mass != full.residual_mass
    assert np.array_equal(changed, ones)
    nan = np.full((ids.shape[0], gamma), np.nan)
    summed = block_weights(ids, draw.draft_probs, draw.target_probs, nan).residual_mass
    assert np.array_equal(np.isnan(summed), ones)
    assert np.array_equal(summed[~ones], full.residual_mass[~ones])


def test_the_masses_are_not_used_below_their_share_or_on_rows_out_of_c_order():
    """Too few weights of 1 (peaked-vs-tail-heavy: about a quarter), or rows that are not C-contiguous (summed in
    their own memory order by the pass over the vocabulary): a table of NaN changes nothing, the pass decides."""
    draw, tables, gamma = _draw("peaked-vs-tail-heavy", 5, 4)
    ids = draw.draft_token_ids
    full = block_weights(ids, draw.draft_probs, draw.target_probs)
    assert (full.weights[:, :gamma] == 1.0).mean() < UNIT_MASS_MIN_SHARE
    nan = np.full((ids.shape[0], gamma), np.nan)
    _same(full, block_weights(ids, draw.draft_probs, draw.target_probs, nan))
    draw, tables, gamma = _draw("large-vocabulary", 5, 1)
    ids = draw.draft_token_ids
    draft, target = np.asfortranarray(draw.draft_probs), np.asfortranarray(draw.target_probs)
    full = block_weights(ids, draft, target)
    assert (full.weights[:, :gamma] == 1.0).mean() >= UNIT_MASS_MIN_SHARE
    _same(full, block_weights(ids, draft, target, np.full((ids.shape[0], gamma), np.nan)))


def test_float32_tables_are_summed_as_the_kernel_sums_them():
    """Rows in float32: the kernel's weights are float64, so ``1 * p - q`` is formed in float64; the tables' masses
    are too (a float32 difference would round differently)."""
    rng = np.random.default_rng(3)
    vocab, rows, gamma = 4096, 24, 3
    target = rng.dirichlet(np.full(vocab, 0.05), size=rows).astype(np.float32)
    draft = rng.dirichlet(np.full(vocab, 0.05), size=rows).astype(np.float32)
    tables = LawTables(target, draft)
    keys = rng.integers(0, rows, size=(512, gamma + 1))
    ids = rng.integers(0, vocab, size=(512, gamma))
    mode = np.arange(512) % 4 != 0  # three rows in four draft the target's mode at each position: weights of 1
    ids[mode] = np.argmax(target[keys[mode, :gamma]], axis=2)
    d, t = np.take(draft, keys[:, :gamma], axis=0), np.take(target, keys, axis=0)
    full = block_weights(ids, d, t)
    ones = full.weights[:, :gamma] == 1.0
    assert ones.mean() >= UNIT_MASS_MIN_SHARE and ones[:, 1:].any() and not ones.all()
    _same(full, block_weights(ids, d, t, tables.residual_mass[keys[:, :gamma]]))


def test_nan_and_small_weights_are_summed_from_the_rows():
    rng = np.random.default_rng(8)
    vocab, batch, gamma = 300, 40, 4
    target = rng.dirichlet(np.ones(vocab), size=(batch, gamma + 1))
    draft = rng.dirichlet(np.ones(vocab), size=(batch, gamma))
    ratio = target[:, :gamma] / draft
    ids = np.argmax(ratio, axis=2)  # the draft the target favours most: weights of 1 ...
    ids[::5] = np.argmin(ratio[::5], axis=2)  # ... and the least, in one row in five: weights below 1
    target[0, 1] = np.nan  # a NaN row at a weight below 1, and one at weight 1
    target[1, 2] = np.nan
    draft[2, 0, ids[2, 0]] = 0.0  # q(x) = 0: weight 1 from p / 0
    target[3, 1] = -0.0 * target[3, 1]
    unit = np.maximum(target[:, :gamma] - draft, 0.0).sum(axis=2)
    full = block_weights(ids, draft, target)
    ones = full.weights[:, :gamma] == 1.0
    assert ones.mean() >= UNIT_MASS_MIN_SHARE and not ones.all() and np.isnan(full.residual_mass).any()
    _same(full, block_weights(ids, draft, target, unit))


def test_blocks_read_the_tables_from_the_vocabulary_where_it_pays():
    for scenario in KEYED:
        tables = scenario.law_tables()
        draw = scenario.draw(np.random.default_rng(1), pool=scenario.prompts(), tables=tables)
        block = VerifierBlock(draw, conditional=False, tables=tables)
        assert (block.unit_residual_mass is not None) == (scenario.vocab_size >= UNIT_RESIDUAL_MIN_VOCAB)
        unkeyed = VerifierBlock(VerifierDraw(draw.draft_token_ids, draw.draft_probs, draw.target_probs,
                                             draw.pool_index), conditional=False, tables=tables)
        assert unkeyed.unit_residual_mass is None
        assert np.array_equal(block.optimal_accepted_rows, unkeyed.optimal_accepted_rows)


def test_tables_of_rows_in_any_memory_order_hold_the_masses_of_contiguous_rows():
    """A model whose laws come back Fortran-ordered: the table's masses are still each row's contiguous sum, the one
    the kernel forms on the C-ordered draws gathered from the table."""
    rng = np.random.default_rng(4)
    target, draft = rng.dirichlet(np.ones(9000), size=24), rng.dirichlet(np.ones(9000), size=24)
    contiguous = LawTables(target, draft).residual_mass
    fortran = LawTables(np.asfortranarray(target), np.asfortranarray(draft)).residual_mass
    assert contiguous.tobytes() == fortran.tobytes()
    assert contiguous.tobytes() == np.maximum(target - draft, 0.0).sum(axis=1).tobytes()
