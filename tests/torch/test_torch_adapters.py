"""Adapters: each peer convention, reimplemented locally (tests/torch/_peer_impls.py), passes through its adapter.

Before the checker: exact path law by G-test at alpha 1e-9 on tiled heterogeneous rows.
With the checker: ``check_verifier(adapter(local_impl), backend="torch")`` on a few scenarios.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import _peer_impls as peers  # noqa: E402
from _torch_helpers import ALPHA, cuda_test, random_rows, tile, verify_pvalue  # noqa: E402

from specdec_check.adapters import from_flashinfer, from_gpt_fast, from_hf_transformers, from_vllm_v0  # noqa: E402

ADAPTED = {
    "vllm_v0": lambda: from_vllm_v0(peers.vllm_v0_forward),
    "flashinfer": lambda: from_flashinfer(peers.flashinfer_chain_speculative_sampling),
    "hf": lambda: from_hf_transformers(peers.hf_speculative_sampling),
    "gpt_fast": lambda: from_gpt_fast(peers.gpt_fast_step),
    "gpt_fast_generator": lambda: from_gpt_fast(peers.gpt_fast_step_with_generator),
}
PER_ROW = {"hf", "gpt_fast", "gpt_fast_generator"}  # Python loop over rows: smaller samples


def test_all_is_sorted():
    import specdec_check.adapters as adapters

    assert adapters.__all__ == sorted(adapters.__all__)
    for name in adapters.__all__:
        if name.startswith("from_"):
            assert getattr(adapters, name).__doc__.count("Example") == 1, name


@pytest.mark.parametrize("name", sorted(ADAPTED))
@pytest.mark.parametrize("gamma", [1, 3])
def test_adapter_reproduces_exact_path_law(name, gamma):
    ids, q, p = random_rows(40 + gamma, batch=3, gamma=gamma, vocab=5)
    n = 1_500 if name in PER_ROW else 20_000
    pvalue, impossible = verify_pvalue(ADAPTED[name](), ids, q, p, n=n, seed=gamma, dtype=torch.float32)
    assert impossible == 0
    assert pvalue > ALPHA, f"{name}: p = {pvalue:.3g}"


@pytest.mark.parametrize("name", ["vllm_v0", "flashinfer"])
def test_adapter_bfloat16_rows(name):
    ids, q, p = random_rows(7, batch=3, gamma=2, vocab=6)
    pvalue, impossible = verify_pvalue(ADAPTED[name](), ids, q, p, n=20_000, seed=5, dtype=torch.bfloat16)
    assert impossible == 0 and pvalue > ALPHA


def test_gamma_zero_through_hf_and_flashinfer():
    ids, q, p = random_rows(8, batch=3, gamma=0, vocab=5)
    for name, n in (("hf", 2_000), ("flashinfer", 20_000)):
        pvalue, impossible = verify_pvalue(ADAPTED[name](), ids, q, p, n=n, seed=1)
        assert impossible == 0 and pvalue > ALPHA, name


@pytest.mark.parametrize("name", sorted(ADAPTED))
def test_adapter_rng_hygiene_and_determinism(name):
    ids, q, p = random_rows(9, batch=3, gamma=2, vocab=5)
    kw = dict(draft_token_ids=tile(ids, 20), draft_probs=tile(q, 20, torch.float32),
              target_probs=tile(p, 20, torch.float32))
    verify = ADAPTED[name]()
    torch.manual_seed(0)
    before = torch.random.get_rng_state().clone()
    a = verify(**kw, generator=torch.Generator().manual_seed(3))
    assert torch.equal(torch.random.get_rng_state(), before), "the adapter left the global RNG changed"
    torch.manual_seed(1)
    b = verify(**kw, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and a.dtype == torch.int64 and a.shape == (60, 3)
    assert "(" in verify.__name__


def test_swapped_names_are_caught():
    """gpt-fast names q the target: a step that reads p as the target fails the law test."""
    ids, q, p = random_rows(12, batch=3, gamma=2, vocab=5)
    pvalue, _ = verify_pvalue(from_gpt_fast(peers.gpt_fast_step_names_swapped), ids, q, p, n=1_500, seed=0)
    assert pvalue < ALPHA


def test_vllm_default_disable_bonus_tokens_is_a_visible_contract_break():
    """With vLLM's old default disable_bonus_tokens=True the last column is always -1: all-accepted rows emit nothing
    extra (the adapter refuses such an instance; a bare forward doing it is passed through and shows it)."""
    def disabled(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids, seeded_seqs=None):
        out = peers.vllm_v0_forward(target_with_bonus_probs, bonus_token_ids, draft_probs, draft_token_ids,
                                    seeded_seqs=seeded_seqs)
        out[:, -1] = -1
        return out

    ids = torch.zeros((4, 1), dtype=torch.int64)
    eq = torch.full((4, 2, 3), 1 / 3)
    out = from_vllm_v0(disabled)(draft_token_ids=ids, draft_probs=eq[:, :1], target_probs=eq,
                                 generator=torch.Generator())
    assert (out[:, 0] == 0).all() and (out[:, 1] == -1).all()  # p == q: always accepted, bonus missing


def test_adapter_errors():
    with pytest.raises(TypeError, match="callable"):
        from_flashinfer(None)
    verify = ADAPTED["flashinfer"]()
    ids, q, p = random_rows(1, batch=2, gamma=1, vocab=3)
    with pytest.raises(TypeError, match="torch.Generator"):
        verify(draft_token_ids=torch.from_numpy(ids), draft_probs=torch.from_numpy(q), target_probs=torch.from_numpy(p),
               generator=np.random.default_rng(0))


def _check_verifier():
    from specdec_check.checker import VERIFIER_CHECKS, check_verifier
    from specdec_check.scenarios import default_verifier_battery

    return check_verifier, default_verifier_battery, VERIFIER_CHECKS


WANTED = {"low-acceptance", "disjoint-supports", "draft-zeros", "one-hot-target"}


@pytest.mark.parametrize("name", ["vllm_v0", "flashinfer", "hf", "gpt_fast"])
def test_adapter_passes_the_checker(name):
    # The local reimplementations copy their library's kernels, which (like the real ones) do not
    # guard against NaN input; that robustness probe is deselected here and tested below.
    check_verifier, battery, checks = _check_verifier()
    scenarios = [s for s in battery() if s.name in WANTED]
    report = check_verifier(ADAPTED[name](), scenarios=scenarios, mode="quick", backend="torch", seed=1,
                            checks=[c for c in checks if c != "non_finite"])
    assert report.passed, report.summary()
    assert report.backend == "torch" and report.dtype == "float32"


def test_unguarded_kernel_turns_nan_into_tokens():
    """The vLLM-style kernel samples from a NaN row; the checker's non-finite probe says so."""
    check_verifier, battery, _ = _check_verifier()
    scenarios = [s for s in battery() if s.name == "low-acceptance"]
    report = check_verifier(ADAPTED["vllm_v0"](), scenarios=scenarios, mode="quick", backend="torch", seed=1,
                            checks=["contract", "non_finite"])
    assert [(f.kind, f.check) for f in report.findings if f.kind in ("failure", "warning")] == [("warning", "non_finite")], \
        report.summary()


@cuda_test
@pytest.mark.parametrize("name", sorted(ADAPTED))
def test_cuda_adapter_law(name):
    ids, q, p = random_rows(4, batch=3, gamma=2, vocab=6)
    n = 500 if name in PER_ROW else 20_000
    pvalue, impossible = verify_pvalue(ADAPTED[name](), ids, q, p, n=n, seed=2, device="cuda")
    assert impossible == 0 and pvalue > ALPHA
