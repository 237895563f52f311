"""TorchModel: the same laws as the numpy models, on a device, in a dtype, without host round trips."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from _torch_helpers import cuda_test  # noqa: E402

from specdec_check.models import (  # noqa: E402
    CausalModel,
    ConstantModel,
    HashedMarkovModel,
    MarkovModel,
    mix,
)
from specdec_check._torch_utils import cast_law_rows  # noqa: E402
from specdec_check.models import CastLawModel, TorchModel  # noqa: E402


class _Quadratic(CausalModel):
    """A CausalModel subclass TorchModel has no port for (exercises the tabulating fallback)."""

    vocab_size, order = 4, 2

    def probs_at(self, contexts):
        ctx = np.asarray(contexts)[..., -2:]
        w = 1.0 + ((ctx[..., :1] * 3 + ctx[..., 1:] * 5 + np.arange(4)) % 7)
        return w / w.sum(-1, keepdims=True)


def _models():
    rng = np.random.default_rng(0)
    V = 6
    m1 = MarkovModel(rng.dirichlet(np.ones(V), size=V + 1))
    m2 = MarkovModel(rng.dirichlet(np.ones(V) * 0.5, size=(V + 1, V + 1)), order=2)
    c = ConstantModel(rng.dirichlet(np.ones(V)))
    h = HashedMarkovModel.random(40, num_prototypes=13, order=3, seed=4)
    return {
        "markov1": m1, "markov2": m2, "constant": c, "hashed3": h,
        "hashed1": HashedMarkovModel.random(V, order=1, seed=9),
        "mix": mix(m2, c, 0.3), "mix_nested": mix(mix(m1, m2, 0.5), h.prototypes[0][:V] / h.prototypes[0][:V].sum(), 0.9),
        "fallback": _Quadratic(),
    }


MODELS = _models()


def _tokens(vocab, seed=0, shape=(40, 11)):
    rng = np.random.default_rng(seed)
    toks = rng.integers(0, vocab, size=shape)
    toks[rng.random(shape) < 0.25] = -1  # padding anywhere: left, right and inside
    toks[0] = -1  # an all-padding row
    return toks


@pytest.mark.parametrize("name", sorted(MODELS))
def test_laws_equal_numpy_model(name):
    model = MODELS[name]
    toks = _tokens(model.vocab_size)
    tm = TorchModel(model)
    out = tm(torch.from_numpy(toks))
    assert out.dtype == torch.float64 and out.shape == toks.shape + (model.vocab_size,)
    np.testing.assert_allclose(out.numpy(), model(toks), rtol=0, atol=1e-12)
    np.testing.assert_allclose(tm.last_probs(torch.from_numpy(toks)).numpy(), model.last_probs(toks), rtol=0, atol=1e-12)
    np.testing.assert_allclose(tm.start_probs().numpy(), model.start_probs(), rtol=0, atol=1e-12)


def test_hash_is_bit_exact_over_many_contexts():
    model = HashedMarkovModel.random(50_000, num_prototypes=97, order=4, seed=2)
    rng = np.random.default_rng(1)
    ctx = rng.integers(0, 50_001, size=(20_000, 4))
    node = model.torch_node("cpu")
    np.testing.assert_array_equal(node.index(torch.from_numpy(ctx)).numpy(), model.prototype_index(ctx))


def test_plain_model_call_on_tensor_agrees():
    model = MODELS["markov2"]
    toks = torch.from_numpy(_tokens(model.vocab_size))
    plain = model(toks)
    assert isinstance(plain, torch.Tensor)
    np.testing.assert_allclose(plain.numpy(), model.to_torch()(toks).numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_dtype_cast_and_cast_law_model(dtype):
    model = MODELS["mix"]
    tm = model.to_torch("cpu", dtype)
    toks = _tokens(model.vocab_size)
    out = tm(torch.from_numpy(toks))
    assert out.dtype == getattr(torch, dtype)
    np.testing.assert_array_equal(out.double().numpy(), torch.from_numpy(model(toks)).to(out.dtype).double().numpy())
    law = CastLawModel(tm.base, tm.dtype)
    assert isinstance(law, CastLawModel)
    np.testing.assert_allclose(law(toks), cast_law_rows(model(toks), dtype), rtol=0, atol=1e-15)
    np.testing.assert_allclose(law(toks).sum(-1), 1.0, atol=1e-12)


def test_cast_law_rows_keeps_zeros_and_renormalises():
    rows = np.array([[0.5, 0.5 - 1e-9, 1e-9, 0.0], [0, 0, 0, 0]])
    law = cast_law_rows(rows, "float16")
    assert law[0, 3] == 0 and law[0, 2] == 0  # 1e-9 underflows in float16
    np.testing.assert_allclose(law[0].sum(), 1.0)
    assert (law[1] == 0).all()


def test_numpy_tokens_are_accepted():
    model = MODELS["markov1"]
    toks = _tokens(model.vocab_size)
    np.testing.assert_allclose(model.to_torch()(toks).numpy(), model(toks), atol=1e-12)


def test_errors():
    model = MODELS["markov1"]
    with pytest.raises(ValueError, match="use one of"):
        model.to_torch("cpu", "int8")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available on this machine"):
            model.to_torch("cuda")
    with pytest.raises(ValueError, match="not a valid torch device"):
        model.to_torch("gpu0")
    with pytest.raises(TypeError, match="integer"):
        model.to_torch()(torch.zeros((1, 2)))
    with pytest.raises(TypeError, match="CausalModel"):
        TorchModel(lambda t: t)


@cuda_test
def test_cuda_model_laws_and_no_sync():
    model = MODELS["hashed3"]
    toks = torch.from_numpy(_tokens(model.vocab_size)).cuda()
    tm = model.to_torch("cuda", "float32")
    tm(toks)
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = tm(toks)
        last = tm.last_probs(toks)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert out.is_cuda and last.is_cuda
    expected = torch.from_numpy(model(toks.cpu().numpy())).float()
    assert torch.equal(out.cpu(), expected)
