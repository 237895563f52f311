"""torch_generate: the joint law of generated tokens is the target's, in every dtype; RNG hygiene; errors."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from _torch_helpers import ALPHA, cuda_test, g_test  # noqa: E402

from specdec_check import exact  # noqa: E402
from specdec_check.models import CastLawModel, HashedMarkovModel, MarkovModel, mix  # noqa: E402
from specdec_check.samplers import torch_generate  # noqa: E402

V, LENGTH = 3, 4
PROMPTS = np.array([[-1, 1], [2, 0], [-1, -1]])


def _pair():
    rng = np.random.default_rng(3)
    target = MarkovModel(rng.dirichlet(np.ones(V) * 0.7, size=(V + 1, V + 1)), order=2)
    draft = mix(MarkovModel(rng.dirichlet(np.ones(V), size=V + 1)), np.array([0.6, 0.0, 0.4]), 0.5)
    return target, draft


def _joint_pvalue(tokens: np.ndarray, target_law, n: int):
    codes = (tokens * (V ** np.arange(LENGTH - 1, -1, -1))).sum(1)
    counts = np.stack([np.bincount(codes[i * n:(i + 1) * n], minlength=V**LENGTH) for i in range(len(PROMPTS))])
    law = np.stack([exact.joint(target_law, LENGTH, prompt=pr).reshape(-1) for pr in PROMPTS])
    return g_test(counts, law)


@pytest.mark.parametrize("dtype,gamma", [("float64", 2), ("float32", 3), ("bfloat16", 2), ("float16", 1),
                                         ("float32", 0)])
def test_joint_law_is_the_target_law(dtype, gamma):
    target, draft = _pair()
    n = 15_000
    tt, td = target.to_torch("cpu", dtype), draft.to_torch("cpu", dtype)
    prompts = torch.from_numpy(np.repeat(PROMPTS, n, axis=0))
    out = torch_generate(target=tt, draft=td, prompts=prompts, max_new_tokens=LENGTH, gamma=gamma,
                         generator=torch.Generator().manual_seed(gamma))
    assert out.shape == (len(prompts), LENGTH) and out.dtype == torch.int64
    pvalue, impossible = _joint_pvalue(out.numpy(), CastLawModel(tt.base, tt.dtype), n)
    assert impossible == 0
    assert pvalue > ALPHA, f"p = {pvalue:.3g}"


def test_plain_callables_and_numpy_models_are_accepted():
    target, draft = _pair()
    n = 10_000
    prompts = torch.from_numpy(np.repeat(PROMPTS, n, axis=0))
    tt = target.to_torch()
    out = torch_generate(target=lambda toks: tt(toks), draft=draft, prompts=prompts, max_new_tokens=LENGTH, gamma=2,
                         generator=torch.Generator().manual_seed(9))
    pvalue, impossible = _joint_pvalue(out.numpy(), target, n)
    assert impossible == 0 and pvalue > ALPHA


def test_global_rng_untouched_and_deterministic():
    target, draft = _pair()
    prompts = torch.from_numpy(np.repeat(PROMPTS, 50, axis=0))
    kw = dict(target=target.to_torch(), draft=draft.to_torch(), prompts=prompts, max_new_tokens=6, gamma=2)
    before = torch.random.get_rng_state().clone()
    a = torch_generate(**kw, generator=torch.Generator().manual_seed(4))
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.manual_seed(77)
    b = torch_generate(**kw, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, b)


def test_edge_sizes():
    target, draft = _pair()
    g = torch.Generator().manual_seed(0)
    kw = dict(target=target.to_torch(), draft=draft.to_torch(), gamma=2, generator=g)
    assert torch_generate(prompts=torch.zeros((2, 1), dtype=torch.int64), max_new_tokens=0, **kw).shape == (2, 0)
    assert torch_generate(prompts=torch.zeros((0, 1), dtype=torch.int64), max_new_tokens=3, **kw).shape == (0, 3)
    out = torch_generate(prompts=torch.zeros((3, 0), dtype=torch.int64), max_new_tokens=5, **kw)
    assert out.shape == (3, 5) and ((out >= 0) & (out < V)).all()


def test_large_vocabulary_runs():
    target = HashedMarkovModel.random(2000, order=2, seed=1)
    draft = HashedMarkovModel.random(2000, order=1, seed=2)
    out = torch_generate(target=target.to_torch(dtype="bfloat16"), draft=draft.to_torch(dtype="bfloat16"),
                         prompts=torch.randint(0, 2000, (8, 3), generator=torch.Generator().manual_seed(0)),
                         max_new_tokens=12, gamma=4, generator=torch.Generator().manual_seed(1))
    assert out.shape == (8, 12) and ((out >= 0) & (out < 2000)).all()


def test_errors():
    target, draft = _pair()
    kw = dict(target=target.to_torch(), draft=draft.to_torch(), max_new_tokens=2, gamma=1)
    prompts = torch.zeros((2, 1), dtype=torch.int64)
    with pytest.raises(TypeError, match="torch.Generator"):
        torch_generate(prompts=prompts, generator=np.random.default_rng(0), **kw)
    with pytest.raises(TypeError, match="torch.Tensor"):
        torch_generate(prompts=np.zeros((2, 1), dtype=np.int64), generator=torch.Generator(), **kw)
    with pytest.raises(ValueError, match="max_new_tokens"):
        torch_generate(prompts=prompts, generator=torch.Generator(), **dict(kw, max_new_tokens=-1))
    with pytest.raises(ValueError, match="share a vocabulary"):
        torch_generate(prompts=prompts, generator=torch.Generator(),
                       **dict(kw, draft=HashedMarkovModel.random(4, seed=0).to_torch()))


@cuda_test
def test_cuda_generate_law():
    target, draft = _pair()
    n = 20_000
    tt, td = target.to_torch("cuda", "bfloat16"), draft.to_torch("cuda", "bfloat16")
    prompts = torch.from_numpy(np.repeat(PROMPTS, n, axis=0)).cuda()
    out = torch_generate(target=tt, draft=td, prompts=prompts, max_new_tokens=LENGTH, gamma=2,
                         generator=torch.Generator("cuda").manual_seed(0))
    assert out.is_cuda
    pvalue, impossible = _joint_pvalue(out.cpu().numpy(), CastLawModel(tt.base, tt.dtype), n)
    assert impossible == 0 and pvalue > ALPHA
