"""Reference samplers against the exact laws (fixed seeds, exactly calibrated identity tests).

Each law assertion uses ``stats.identity_test`` at alpha = 1e-9, whose size is at most
alpha for fixed-n data; with the seeds fixed the tests are deterministic, and a correct
sampler would fail one of them for a random seed with probability below 1e-8 in total.
"""

import numpy as np
import pytest

from specdec_check import MarkovModel, exact, stats
from specdec_check.samplers import numpy_generate, numpy_verify

ALPHA = 1e-9


def _rows(rng, batch, gamma, vocab, zeros=False):
    dp = rng.random((batch, gamma, vocab)) ** 3
    tp = rng.random((batch, gamma + 1, vocab)) ** 3
    if zeros:
        dp[..., 0] = 0.0
        tp[..., 1] = 0.0
    dp /= dp.sum(-1, keepdims=True)
    tp /= tp.sum(-1, keepdims=True)
    return dp, tp


def _draw_drafts(rng, dp):
    cdf = np.cumsum(dp, -1)
    return (cdf < rng.random(dp.shape[:2])[..., None]).sum(-1)


@pytest.mark.parametrize("gamma, zeros", [(1, False), (3, True)])
def test_numpy_verify_matches_path_step_law(gamma, zeros):
    rng = np.random.default_rng(7)
    vocab, distinct, reps = 5, 4, 50_000
    dp, tp = _rows(rng, distinct, gamma, vocab, zeros)
    dp, tp = np.repeat(dp, reps, 0), np.repeat(tp, reps, 0)
    ids = _draw_drafts(rng, dp)
    out = numpy_verify(draft_token_ids=ids, draft_probs=dp, target_probs=tp, generator=np.random.default_rng(8))
    emitted = (out >= 0).sum(1)
    final = out[np.arange(out.shape[0]), emitted - 1]
    law = exact.path_step_law(ids, dp, tp).reshape(out.shape[0], -1)
    # group rows by (row set, drafted path): outcome (k, y) is multinomial within each group
    group = np.unique(np.concatenate([np.arange(out.shape[0])[:, None] // reps, ids], 1), axis=0, return_inverse=True)[1]
    code = group.reshape(-1) * law.shape[1] + (emitted - 1) * vocab + final
    n_groups = group.max() + 1
    expected = np.zeros(n_groups * law.shape[1])
    np.add.at(expected, group.reshape(-1)[:, None] * law.shape[1] + np.arange(law.shape[1]), law)
    result = stats.identity_test(np.bincount(code, minlength=expected.size), expected / expected.sum(), alpha=ALPHA)
    assert not result.rejected, result
    # the first emitted token, integrated over the drafts, follows the first target row
    for r in range(distinct):
        sel = slice(r * reps, (r + 1) * reps)
        res = stats.identity_test(np.bincount(out[sel, 0], minlength=vocab), tp[r * reps, 0], alpha=ALPHA)
        assert not res.rejected, res


def test_numpy_generate_matches_joint_law():
    rng = np.random.default_rng(9)
    target = MarkovModel(rng.dirichlet(np.full(4, 0.5), size=5))
    draft = MarkovModel(rng.dirichlet(np.full(4, 0.5), size=5))
    prompts = np.array([[-1, 2]] * 20_000 + [[1, 3]] * 20_000)
    out = numpy_generate(target=target, draft=draft, prompts=prompts, max_new_tokens=3, gamma=2,
                         generator=np.random.default_rng(10))
    for start, prompt in ((0, [2]), (20_000, [1, 3])):
        codes = out[start:start + 20_000] @ np.array([16, 4, 1])
        law = exact.joint(target, 3, prompt).reshape(-1)
        assert not stats.identity_test(np.bincount(codes, minlength=64), law, alpha=ALPHA).rejected


def test_numpy_verify_edge_cases():
    rng = np.random.default_rng(11)
    dp, tp = _rows(rng, 8, 2, 6)
    ids = _draw_drafts(rng, dp)
    same = numpy_verify(draft_token_ids=ids, draft_probs=tp[:, :2].copy(), target_probs=tp,
                        generator=np.random.default_rng(1))
    assert (same[:, :2] == ids).all()  # target == draft accepts every draft (p / q = 1)
    # disjoint supports: every draft has target probability 0 and is rejected at position 0
    dp_d = np.zeros((4, 1, 4)); dp_d[:, :, :2] = 0.5
    tp_d = np.zeros((4, 2, 4)); tp_d[:, :, 2:] = 0.5
    out = numpy_verify(draft_token_ids=np.zeros((4, 1), int), draft_probs=dp_d, target_probs=tp_d,
                       generator=np.random.default_rng(2))
    assert (out[:, 0] >= 2).all() and (out[:, 1] == -1).all()
    # gamma = 0 is plain sampling from the (bonus) target row
    out0 = numpy_verify(draft_token_ids=np.zeros((3, 0), int), draft_probs=np.zeros((3, 0, 6)), target_probs=tp[:3, :1],
                        generator=np.random.default_rng(3))
    assert out0.shape == (3, 1) and (out0 >= 0).all()


def test_numpy_verify_rejects_nan_and_non_generators():
    rng = np.random.default_rng(12)
    dp, tp = _rows(rng, 2, 1, 4)
    ids = np.argmax(dp, -1)
    bad = tp.copy(); bad[0, 0, ids[0, 0]] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        numpy_verify(draft_token_ids=ids, draft_probs=dp, target_probs=bad, generator=np.random.default_rng(0))
    with pytest.raises(TypeError, match="Generator"):
        numpy_verify(draft_token_ids=ids, draft_probs=dp, target_probs=tp, generator=0)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"gamma": -1}, ValueError, "gamma"),
    ({"max_new_tokens": -2}, ValueError, "max_new_tokens"),
    ({"prompts": np.array([[7]])}, ValueError, "out of range"),
])
def test_numpy_generate_bad_input(kwargs, error, match):
    model = MarkovModel(np.full((4, 3), 1 / 3))
    args = dict(target=model, draft=model, prompts=np.array([[0]]), max_new_tokens=2, gamma=1,
                generator=np.random.default_rng(0))
    args.update(kwargs)
    with pytest.raises(error, match=match):
        numpy_generate(**args)


@pytest.mark.parametrize("vocab", [1, 2, 7, 32, 1000])
def test_categorical_from_table_gives_the_same_tokens_as_categorical(vocab):
    """Binary search over a law table and inverse CDF over gathered rows agree token for token,
    including rows with zero-mass tokens at both ends and uniforms that round ``u * total`` up."""
    from specdec_check.samplers import categorical
    from specdec_check._tables import categorical_from_table, exclusive_cumsum, search_table

    rng = np.random.default_rng(vocab)
    table = rng.random((40, vocab)) ** 4
    table[::3, 0] = 0.0
    table[::4, -1] = 0.0
    table[:, vocab // 2] += 0.1  # every row keeps some mass
    table[0] = 0.0
    table[0, vocab // 2] = 1.0
    table /= table.sum(axis=1, keepdims=True)
    rows = rng.integers(0, 40, size=20_000)
    expected = categorical(table[rows], np.random.default_rng(1))
    got = categorical_from_table(search_table(exclusive_cumsum(table)), rows, np.random.default_rng(1), probs_rows=table)
    np.testing.assert_array_equal(got, expected)
    assert (table[rows, got] > 0).all()

    class _One:  # u = 1 lands on the total (as u * total rounding up would): the last positive token
        def random(self, n):
            return np.ones(n)

    top = categorical_from_table(search_table(exclusive_cumsum(table)), rows, _One(), probs_rows=table)
    np.testing.assert_array_equal(top, categorical(table[rows], _One()))
    np.testing.assert_array_equal(top, vocab - 1 - (table[rows, ::-1] > 0).argmax(axis=1))


# --------------------------------------------------------------------------- properties over drawn inputs
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from specdec_check.strategies import verifier_inputs  # noqa: E402


@settings(max_examples=60)
@given(inputs=verifier_inputs(max_gamma=4, max_rows=4, max_vocab=6), seed=st.integers(0, 2**32 - 1))
def test_numpy_verify_emits_only_possible_outcomes_for_any_inputs(inputs, seed):
    """The output contract and the support of Leviathan et al.'s rule, on any drawn inputs: each row is
    ``k`` accepted drafts, one final token, then -1 padding, and its (k, final) has positive probability
    under the exact path law."""
    ids, dp, tp = inputs.draft_token_ids, inputs.draft_probs, inputs.target_probs
    batch, gamma = ids.shape
    out = numpy_verify(draft_token_ids=ids, draft_probs=dp, target_probs=tp, generator=np.random.default_rng(seed))
    assert out.shape == (batch, gamma + 1) and np.issubdtype(out.dtype, np.integer)
    law = exact.path_step_law(ids, dp, tp)  # [B, gamma + 1, V]: P(K = k, final = y)
    for b in range(batch):
        k = int((out[b] >= 0).sum()) - 1
        assert k >= 0 and (out[b, : k + 1] >= 0).all() and (out[b, k + 1:] == -1).all(), out[b]
        np.testing.assert_array_equal(out[b, :k], ids[b, :k])
        assert law[b, k, out[b, k]] > 0, (b, k, out[b].tolist())


def _outcome(kernel, ids, dp, tp, uniforms):
    """A kernel's output, or the type of the error it raised."""
    try:
        return kernel(ids, dp, tp, uniforms)
    except (ValueError, IndexError) as exc:
        return type(exc)


def _whole(ids, dp, tp, uniforms):
    """numpy_verify itself on these uniforms (it picks the scalar or a vectorised path)."""
    from specdec_check.samplers import _numpy_verify as nv

    return nv.numpy_verify(draft_token_ids=ids, draft_probs=dp, target_probs=tp, generator=_Fixed(uniforms))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(inputs=verifier_inputs(max_gamma=4, max_rows=6, max_vocab=9), seed=st.integers(0, 2**32 - 1))
def test_the_scalar_path_gives_the_vectorised_output_bit_for_bit(inputs, seed):
    """Small calls run on Python floats (``_verify_scalar``); on the same uniforms the general kernel gives the
    same output (valid inputs: only a row whose inverse CDF overflows is handed to the vectorised paths)."""
    from specdec_check.samplers import _numpy_verify as nv

    ids, dp, tp = inputs.draft_token_ids, inputs.draft_probs, inputs.target_probs
    uniforms = np.random.default_rng(seed).random((ids.shape[0], ids.shape[1] + 1))
    assert nv._scalar_path_applies(ids, dp, tp)
    general = nv._verify_general(ids, dp, tp, uniforms)
    scalar = nv._verify_scalar(ids, dp, tp, uniforms)
    if scalar is not None:
        np.testing.assert_array_equal(scalar, general)
    np.testing.assert_array_equal(_whole(ids, dp, tp, uniforms), general)


@pytest.mark.parametrize("spoil", ["none", "nan-later-draft", "inf-draft", "nan-row", "inf-row", "nan-in-row",
                                   "inf-in-row", "zero-row", "id-out-of-range", "negative-id"])
@pytest.mark.parametrize("seed", range(4))
def test_the_scalar_path_hands_every_bad_input_to_the_vectorised_kernels(spoil, seed):
    """Inputs the vectorised kernels reject (a NaN or infinite probability at any drafted token, also after the
    row's rejection; a row to sample with no finite mass or none at all; a draft id outside [0, V)): the scalar
    path declines them, and numpy_verify answers as the general kernel does (raises, or wraps a negative id)."""
    from specdec_check.samplers import _numpy_verify as nv

    rng = np.random.default_rng(seed)
    batch, gamma, vocab = 3, 3, 5
    dp, tp = rng.dirichlet(np.ones(vocab), (batch, gamma)), rng.dirichlet(np.ones(vocab), (batch, gamma + 1))
    ids = rng.integers(0, vocab, (batch, gamma))
    uniforms = rng.random((batch, gamma + 1))
    tp[1, 0, ids[1, 0]] = 0.0  # row 1 rejects its first draft (p = 0 there) ...
    if spoil == "nan-later-draft":
        tp[1, gamma - 1, ids[1, gamma - 1]] = np.nan  # ... so a NaN further on is never compared, yet an error
    elif spoil == "inf-draft":
        dp[1, gamma - 1, ids[1, gamma - 1]] = np.inf
    elif spoil in ("nan-row", "inf-row"):
        tp[1, 0, :] = np.nan if spoil == "nan-row" else np.inf
        tp[1, 0, ids[1, 0]] = 0.0
    elif spoil in ("nan-in-row", "inf-in-row"):  # one entry of the row to sample, not a drafted token
        tp[1, 0, (ids[1, 0] + 1) % vocab] = np.nan if spoil == "nan-in-row" else np.inf
    elif spoil == "zero-row":
        tp[1, 0, :] = 0.0
        dp[1, 0, :] = 1.0 / vocab
    elif spoil != "none":
        ids[1, 0] = vocab if spoil == "id-out-of-range" else -1
    if spoil == "none":  # the control: valid inputs take the scalar path, which answers as the general kernel
        scalar = nv._verify_scalar(ids, dp, tp, uniforms)
        assert scalar is not None
        np.testing.assert_array_equal(scalar, nv._verify_general(ids, dp, tp, uniforms))
        np.testing.assert_array_equal(_whole(ids, dp, tp, uniforms), scalar)
        return
    assert nv._verify_scalar(ids, dp, tp, uniforms) is None
    general = _outcome(nv._verify_general, ids, dp, tp, uniforms)
    whole = _outcome(_whole, ids, dp, tp, uniforms)
    if spoil == "negative-id":  # numpy indexing wraps -1 to the last token: the general kernel answers
        np.testing.assert_array_equal(whole, general)
    else:
        assert general in (ValueError, IndexError) and whole is general, (general, whole)


class _Fixed(np.random.Generator):
    """A generator whose one draw is the given uniforms."""

    def __init__(self, uniforms):
        super().__init__(np.random.PCG64(0))
        self.uniforms = uniforms

    def random(self, shape):
        assert tuple(shape) == self.uniforms.shape
        return self.uniforms


@pytest.mark.parametrize("gamma", [0, 1, 3])  # gamma = 0 samples p itself: the count, not the search (a control)
def test_the_vectorised_kernel_on_large_vocabularies_matches_the_general_one(gamma):
    """From V = 2,048 the contiguous kernel finds the token by a binary search of the running sum: on rows with
    long runs of zeros (ties of the running sum), one-hot rows and a u that lands on the total, its output is the
    general kernel's."""
    from specdec_check.samplers import _numpy_verify as nv

    rng = np.random.default_rng(gamma)
    batch, vocab = 6, 4096
    dp = rng.dirichlet(np.full(vocab, 0.05), (batch, gamma))
    tp = rng.dirichlet(np.full(vocab, 0.05), (batch, gamma + 1))
    tp[0, :, :] = 0.0
    tp[0, :, 7] = 1.0  # one-hot target rows
    tp[1, :, : vocab // 2] = 0.0  # half the vocabulary at zero: the running sum ties over it
    tp[1] /= tp[1].sum(axis=-1, keepdims=True)
    ids = rng.integers(0, vocab, (batch, gamma))
    for seed in range(20):
        uniforms = np.random.default_rng(seed).random((batch, gamma + 1))
        uniforms[2, gamma] = np.nextafter(1.0, 0.0)
        uniforms[1, gamma] = 0.0  # the cut is 0: it ties the running sum over the zeros, the token is past them
        np.testing.assert_array_equal(nv._verify_contiguous(ids, dp, tp, uniforms),
                                      nv._verify_general(ids, dp, tp, uniforms))
