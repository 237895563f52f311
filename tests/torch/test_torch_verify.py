"""torch_verify: exact law (every dtype), RNG hygiene, determinism, errors, device handling."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from _torch_helpers import ALPHA, check_format, cuda_test, g_test, law_of, outcome_counts, random_rows, tile, verify_pvalue  # noqa: E402

from specdec_check.samplers import numpy_verify, torch_verify  # noqa: E402

DTYPES = [torch.float64, torch.float32, torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("gamma", [0, 1, 3])
def test_law_matches_exact_path_law(dtype, gamma):
    ids, q, p = random_rows(10 + gamma, batch=6, gamma=gamma, vocab=7)
    pvalue, impossible = verify_pvalue(torch_verify, ids, q, p, n=20_000, seed=gamma, dtype=dtype)
    assert impossible == 0
    assert pvalue > ALPHA, f"G-test p = {pvalue:.3g}"


def test_law_large_vocab_accepted_counts_and_first_token():
    """V = 1000, gamma = 4: the accepted-count law and the token law at each stop position."""
    ids, q, p = random_rows(5, batch=3, gamma=4, vocab=1000, concentration=0.3, zero_frac=0.5)
    n = 4_000
    gen = torch.Generator().manual_seed(11)
    out = torch_verify(draft_token_ids=tile(ids, n), draft_probs=tile(q, n, torch.float32),
                       target_probs=tile(p, n, torch.float32), generator=gen).numpy()
    check_format(out, ids, n, 1000)
    counts = outcome_counts(out, 3, n, 1000)
    law = law_of(ids, q, p, torch.float32)
    pv_count, _ = g_test(counts.sum(-1), law.sum(-1))
    pv_joint, impossible = g_test(counts, law)
    assert impossible == 0
    assert pv_count > ALPHA and pv_joint > ALPHA


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_adversarial_rows(dtype):
    """p == q (never rejects), disjoint supports (always rejects at 0), q(x) = 0 at the draft, one-hot p."""
    V = 5
    eq = np.array([0.1, 0.2, 0.3, 0.4, 0.0])
    disjoint_p, disjoint_q = np.array([0.5, 0.5, 0, 0, 0]), np.array([0, 0, 0.2, 0.3, 0.5])
    onehot = np.eye(V)[3]
    q = np.stack([[eq, eq], [disjoint_q, disjoint_q], [np.eye(V)[1], eq], [eq, eq]])
    p = np.stack([[eq, eq, eq], [disjoint_p, disjoint_p, eq], [np.array([.2, 0, .3, .5, 0]), eq, eq],
                  [onehot, onehot, onehot]])
    ids = np.array([[3, 2], [2, 3], [1, 1], [3, 0]])
    q[2, 0] = np.array([0, .5, .5, 0, 0])
    ids[2] = [0, 1]  # draft 0 has q = 0 and p = 0.2 (always accepted); draft 1 has p = q (never rejected)
    pvalue, impossible = verify_pvalue(torch_verify, ids, q, p, n=20_000, dtype=dtype, seed=3)
    assert impossible == 0
    assert pvalue > ALPHA


def test_matches_numpy_reference_law_two_sample():
    """torch and numpy references against each other (and both against the exact law) on the same rows."""
    ids, q, p = random_rows(21, batch=3, gamma=2, vocab=4)
    n = 30_000
    law = law_of(ids, q, p, torch.float64)
    out_np = numpy_verify(draft_token_ids=np.repeat(ids, n, 0), draft_probs=np.repeat(q, n, 0),
                          target_probs=np.repeat(p, n, 0), generator=np.random.default_rng(0))
    pv_np, imp_np = g_test(outcome_counts(out_np, 3, n, 4), law)
    pv_t, imp_t = verify_pvalue(torch_verify, ids, q, p, n=n, dtype=torch.float64, seed=1)
    assert imp_np == imp_t == 0 and pv_np > ALPHA and pv_t > ALPHA


def _inputs(seed=0, n=200, dtype=torch.float32):
    ids, q, p = random_rows(seed, batch=3, gamma=3, vocab=6)
    return dict(draft_token_ids=tile(ids, n), draft_probs=tile(q, n, dtype), target_probs=tile(p, n, dtype))


def test_only_the_given_generator_is_used():
    kw = _inputs()
    torch.manual_seed(1234)
    before = torch.random.get_rng_state().clone()
    a = torch_verify(**kw, generator=torch.Generator().manual_seed(7))
    assert torch.equal(torch.random.get_rng_state(), before), "torch_verify touched the global RNG"
    torch.manual_seed(999)  # a different global state must not change the output
    b = torch_verify(**kw, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b)


def test_deterministic_for_a_generator_state_and_advances_it():
    kw = _inputs()
    g = torch.Generator().manual_seed(5)
    state = g.get_state()
    a = torch_verify(**kw, generator=g)
    assert not torch.equal(g.get_state(), state), "the generator was not advanced"
    g.set_state(state)
    b = torch_verify(**kw, generator=g)
    c = torch_verify(**kw, generator=g)
    assert torch.equal(a, b)
    assert not torch.equal(b, c)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_output_type_device_and_inputs_untouched(dtype):
    kw = _inputs(dtype=dtype)
    copies = {k: v.clone() for k, v in kw.items()}
    out = torch_verify(**kw, generator=torch.Generator().manual_seed(0))
    assert out.dtype == torch.int64 and out.device == kw["target_probs"].device and out.shape == (600, 4)
    for k in kw:
        assert torch.equal(kw[k], copies[k]), f"{k} was modified"


def test_int32_ids_are_accepted():
    kw = _inputs()
    kw["draft_token_ids"] = kw["draft_token_ids"].to(torch.int32)
    out = torch_verify(**kw, generator=torch.Generator().manual_seed(0))
    assert out.dtype == torch.int64


def test_empty_batch():
    out = torch_verify(draft_token_ids=torch.zeros((0, 2), dtype=torch.int64), draft_probs=torch.zeros((0, 2, 3)),
                       target_probs=torch.zeros((0, 3, 3)), generator=torch.Generator())
    assert out.shape == (0, 3)


def test_numpy_generator_is_a_type_error():
    with pytest.raises(TypeError, match="torch.Generator"):
        torch_verify(**_inputs(), generator=np.random.default_rng(0))


def test_numpy_arrays_are_a_type_error():
    kw = {k: v.numpy() for k, v in _inputs().items()}
    with pytest.raises(TypeError, match="torch.Tensor"):
        torch_verify(**kw, generator=torch.Generator())


@pytest.mark.parametrize("bad", [torch.int64, torch.complex64])
def test_bad_probability_dtype_is_a_value_error(bad):
    kw = _inputs()
    kw["target_probs"] = kw["target_probs"].to(bad)
    with pytest.raises(ValueError, match="float32, bfloat16, float16 or float64"):
        torch_verify(**kw, generator=torch.Generator())


def test_float_ids_are_a_type_error():
    kw = _inputs()
    kw["draft_token_ids"] = kw["draft_token_ids"].float()
    with pytest.raises(TypeError, match="integer"):
        torch_verify(**kw, generator=torch.Generator())


def test_shape_mismatch_is_a_value_error():
    kw = _inputs()
    kw["target_probs"] = kw["target_probs"][:, :-1]
    with pytest.raises(ValueError, match="bonus position"):
        torch_verify(**kw, generator=torch.Generator())


@cuda_test
def test_cuda_law_and_device():
    ids, q, p = random_rows(3, batch=5, gamma=3, vocab=9)
    for dtype in (torch.float32, torch.bfloat16):
        pvalue, impossible = verify_pvalue(torch_verify, ids, q, p, n=40_000, dtype=dtype, device="cuda", seed=2)
        assert impossible == 0 and pvalue > ALPHA


@cuda_test
def test_cuda_generator_on_other_device_is_a_value_error():
    kw = {k: v.cuda() for k, v in _inputs().items()}
    with pytest.raises(ValueError, match="generator is on cpu"):
        torch_verify(**kw, generator=torch.Generator())
    with pytest.raises(ValueError, match="put all inputs on one device"):
        torch_verify(**dict(kw, draft_probs=kw["draft_probs"].cpu()), generator=torch.Generator("cuda"))


@cuda_test
def test_cuda_no_host_synchronisation():
    kw = {k: v.cuda() for k, v in _inputs(n=2000).items()}
    g = torch.Generator("cuda").manual_seed(0)
    torch_verify(**kw, generator=g)  # warm up
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = torch_verify(**kw, generator=g)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert out.is_cuda


@cuda_test
def test_cuda_global_rng_untouched():
    kw = {k: v.cuda() for k, v in _inputs().items()}
    before = torch.cuda.get_rng_state().clone()
    torch_verify(**kw, generator=torch.Generator("cuda").manual_seed(1))
    assert torch.equal(torch.cuda.get_rng_state(), before)


@pytest.mark.parametrize("reference", ["torch_verify", "torch_ragged_verify"])
def test_references_emit_no_zero_probability_token_when_every_uniform_is_zero(reference):
    """A uniform of exactly 0 (2^-24 per float32 draw): the exponential race gave every entry the same
    score (log 0 = -inf, or 0 / 0 for a zero Exp(1) draw), so argmax returned token 0 though its target
    probability was 0; the checker's zero-coin probe found it in both references."""
    from specdec_check import checker, samplers

    check = checker.check_verifier if reference == "torch_verify" else checker.check_ragged_verifier
    report = check(getattr(samplers, reference), mode="quick", seed=0, backend="torch", checks=("zero_coins",))
    probed = [r for r in report.to_dict()["results"] if r["check"] == "zero_coins"]
    assert sum(r["method"] != "skipped" for r in probed) >= 3, probed
    assert not report.findings, [f.message for f in report.findings]
