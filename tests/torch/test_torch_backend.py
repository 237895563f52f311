"""TorchBackend (checker/_torch_backend.py) and the torch references through the checker."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from _torch_helpers import cuda_test  # noqa: E402

from specdec_check import exact  # noqa: E402
from specdec_check.checker.backends.torch_backend import TOLERANCES, TorchBackend, encode_on_device  # noqa: E402
from specdec_check.checker.backends.xp import bincount  # noqa: E402
from specdec_check.models import HashedMarkovModel, MarkovModel  # noqa: E402
from specdec_check.models import TorchModel  # noqa: E402
from specdec_check.samplers import torch_generate, torch_verify  # noqa: E402

DTYPES = ["float64", "float32", "bfloat16", "float16"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_interface(dtype):
    b = TorchBackend("cpu", dtype)
    assert (b.name, b.device, b.dtype, b.tolerance) == ("torch", "cpu", dtype, TOLERANCES[dtype])
    g = b.generator(5)
    assert isinstance(g, torch.Generator) and g.device.type == "cpu"
    assert torch.equal(torch.rand(3, generator=g), torch.rand(3, generator=b.generator(5)))
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(9) * 0.3, size=(4, 3))
    q = rng.dirichlet(np.ones(9), size=(4, 2))
    ids = rng.integers(0, 9, size=(4, 2))
    kw = b.verifier_inputs(ids, q, p)
    assert kw["draft_token_ids"].dtype == torch.int64
    assert kw["draft_probs"].dtype == getattr(torch, dtype) == kw["target_probs"].dtype
    law = b.law_rows(p)
    np.testing.assert_array_equal(law == 0, kw["target_probs"].double().numpy() == 0)  # zeros stay zero
    np.testing.assert_allclose(law.sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(law, kw["target_probs"].double().numpy() / kw["target_probs"].double().numpy().sum(
        -1, keepdims=True), rtol=1e-15, atol=0)
    out = torch_verify(**kw, generator=g)
    assert b.on_device(out)  # an integer tensor on the backend's device: checked where it is
    host = b.to_host(out)
    assert host.dtype == np.int64 and host.shape == (4, 3)
    t, d = b.models(MarkovModel(np.full((10, 9), 1 / 9)), HashedMarkovModel.random(9, seed=0))
    assert isinstance(t, TorchModel) and t.dtype == getattr(torch, dtype)
    assert b.prompts(np.array([[1, -1]])).dtype == torch.int64


def test_law_rows_float64_is_the_identity_up_to_renormalisation():
    rows = np.random.default_rng(1).dirichlet(np.ones(5), size=3)
    np.testing.assert_allclose(TorchBackend(dtype="float64").law_rows(rows), rows, rtol=1e-15)


def test_on_device_and_to_host():
    b = TorchBackend()
    assert not b.on_device(np.zeros((2, 2), dtype=np.int64))  # not a tensor: the host path checks it
    assert not b.on_device(torch.zeros((2, 2)))  # a float tensor: the host path names the dtype
    with pytest.raises(TypeError, match="integers"):
        b.to_host(torch.zeros((2, 2)))
    np.testing.assert_array_equal(b.to_host([[1, -1]]), [[1, -1]])


def test_law_model_matches_what_the_models_return():
    b = TorchBackend(dtype="bfloat16")
    target = HashedMarkovModel.random(11, order=2, seed=3)
    tm, _ = b.models(target, target)
    toks = np.array([[1, 2, -1, 3], [-1, -1, 4, 5]])
    got = tm(torch.from_numpy(toks)).double()
    np.testing.assert_allclose(b.law_model(target)(toks), (got / got.sum(-1, keepdim=True)).numpy(), atol=1e-15)
    assert TorchBackend(dtype="float64").law_model(target) is target


def test_device_and_dtype_validation():
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available on this machine; use device='cpu'"):
            TorchBackend("cuda")
    with pytest.raises(ValueError, match="not a valid torch device"):
        TorchBackend("tpu-ish")
    with pytest.raises(ValueError, match=r"\['bfloat16', 'float16', 'float32', 'float64'\]"):
        TorchBackend(dtype="int8")
    assert TorchBackend(dtype="bf16").dtype == "bfloat16"
    assert TorchBackend(dtype=torch.float16).dtype == "float16"


def test_tolerances_cover_the_reference_rounding():
    """The float32 tolerance exceeds the reference's worst relative error on renormalised rows by >= 3x."""
    rng = np.random.default_rng(0)
    x = rng.dirichlet(np.ones(128_256) * 0.3, size=8)
    for dtype in ("float32", "bfloat16", "float16"):
        c = torch.from_numpy(x).to(getattr(torch, dtype))
        law = TorchBackend(dtype=dtype).law_rows(x)
        seen = (c.float() / c.sum(-1, dtype=torch.float32, keepdim=True)).double().numpy()
        m = law > 0
        assert np.abs(seen[m] / law[m] - 1).max() * 3 < TOLERANCES["float32"] <= TOLERANCES[dtype]


def test_count_and_encode_on_device():
    rng = np.random.default_rng(2)
    V, g = 5, 3
    ids = rng.integers(0, V, size=(200, g))
    p = rng.dirichlet(np.ones(V) * 0.5, size=(200, g + 1))
    q = rng.dirichlet(np.ones(V) * 0.5, size=(200, g))
    out = torch_verify(draft_token_ids=torch.from_numpy(ids), draft_probs=torch.from_numpy(q),
                       target_probs=torch.from_numpy(p), generator=torch.Generator().manual_seed(0))
    codes, ok = encode_on_device(out, V)
    assert ok.all()
    np.testing.assert_array_equal(codes.numpy(), exact.encode_emitted(out.numpy(), V))
    total = exact.num_step_outcomes(V, g)
    np.testing.assert_array_equal(bincount(codes, total), np.bincount(codes.numpy(), minlength=total))
    bad = out.clone()
    bad[0] = torch.tensor([-1, 2, -1, -1])
    codes, ok = encode_on_device(bad, V)
    assert not ok[0] and codes[0] == -1 and ok[1:].all()


def _checker():
    try:
        from specdec_check.checker import check_verifier
        from specdec_check.checker.generator.kind import check_generator
    except ImportError:  # pragma: no cover - checker not merged yet
        pytest.skip("the checker is not available yet")
    return check_verifier, check_generator


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_verify_passes_the_checker(dtype):
    check_verifier, _ = _checker()
    report = check_verifier(torch_verify, mode="quick", backend="torch", device="cpu", dtype=dtype, seed=dtype.__len__())
    assert report.passed, report.summary()
    assert (report.backend, report.device, report.dtype) == ("torch", "cpu", dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_generate_passes_the_checker(dtype):
    _, check_generator = _checker()
    report = check_generator(torch_generate, mode="quick", backend="torch", device="cpu", dtype=dtype)
    assert report.passed, report.summary()


def test_numpy_generator_sampler_fails_on_the_torch_backend():
    check_verifier, _ = _checker()
    from specdec_check.samplers import numpy_verify

    try:
        report = check_verifier(numpy_verify, mode="quick", backend="torch", checks=["contract"])
    except (TypeError, ValueError) as exc:
        assert "Generator" in str(exc) or "numpy" in str(exc)
    else:
        assert not report.passed


@cuda_test
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cuda_backend_end_to_end(dtype):
    check_verifier, check_generator = _checker()
    b = TorchBackend("cuda", dtype)
    assert b.generator(0).device.type == "cuda"
    assert b.verifier_inputs(np.zeros((1, 1), dtype=np.int64), np.ones((1, 1, 2)) / 2,
                             np.ones((1, 2, 2)) / 2)["target_probs"].is_cuda
    report = check_verifier(torch_verify, mode="quick", backend="torch", device="cuda", dtype=dtype)
    assert report.passed and report.device.startswith("cuda"), report.summary()
    report = check_generator(torch_generate, mode="quick", backend="torch", device="cuda", dtype=dtype)
    assert report.passed, report.summary()


def test_a_cpu_run_uses_one_thread_and_restores_the_callers_setting(monkeypatch):
    from specdec_check.checker.backends.torch_backend import THREADS_ENV

    before = torch.get_num_threads()
    backend = TorchBackend("cpu")
    monkeypatch.delenv(THREADS_ENV, raising=False)
    with backend.running():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    monkeypatch.setenv(THREADS_ENV, "2")
    with backend.running():
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == before
    monkeypatch.setenv(THREADS_ENV, "many")
    with pytest.raises(ValueError, match=THREADS_ENV):
        with backend.running():
            pass
    assert torch.get_num_threads() == before


def test_the_cpu_counts_on_the_host_unless_asked():
    assert not TorchBackend("cpu").counts_on_device
    assert TorchBackend("cpu", counts_on_device=True).counts_on_device


def test_the_torch_backend_casts_rows_to_float32_as_torch_does():
    # issue 31: the float32 rows are cast by numpy (half the time); the sampler must get torch's numbers
    rng = np.random.default_rng(2)
    rows = rng.standard_normal((50, 3, 400)) * 10.0 ** rng.integers(-60, 45, (50, 3, 400))
    rows[0, 0, :6] = [np.nan, np.inf, -np.inf, -0.0, 1e-46, 3.4028235e38 * 1.0000001]
    ours = TorchBackend("cpu", "float32")._probs(rows)
    theirs = torch.from_numpy(rows).to(torch.float32)
    assert ours.dtype == torch.float32 and ours.is_contiguous()
    assert ours.numpy().tobytes() == theirs.numpy().tobytes()
    assert not np.shares_memory(ours.numpy(), rows)
