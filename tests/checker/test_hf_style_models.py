"""The checker's models in the classic HF convention (issue 26): what a copied loop calls, answered over the exact
laws, and the single-sequence loop adapter's plumbing."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from specdec_check.adapters import AdapterSignatureError, from_classic_loop  # noqa: E402
from specdec_check.checker.generator.caller import CountingModel  # noqa: E402
from specdec_check.models import MarkovModel  # noqa: E402


@pytest.fixture
def model():
    rng = np.random.default_rng(0)
    table = rng.dirichlet(np.full(5, 0.5), size=6)  # 5 contexts and the start; zeros not excluded
    table[:, 3] = 0.0
    return CountingModel(MarkovModel(table / table.sum(axis=1, keepdims=True)))


def test_a_legacy_tuple_cache_continues_the_sequence_and_rolls_back_by_slicing(model):
    full = model(torch.tensor([[1, 2, 4, 0, 2]]))
    assert torch.allclose(full.logits.exp(), full) and torch.isinf(full.logits[..., 3]).all()  # log 0 = -inf
    prefill = model(torch.tensor([[1, 2, 4]]))
    (keys, values), = prefill.past_key_values
    assert keys.shape == (1, 1, 3, 1)  # [B, heads, T, head_dim]: the cached length is dimension 2, as HF's
    step = model(torch.tensor([[0, 2]]), past_key_values=prefill.past_key_values, use_cache=True)
    assert torch.allclose(torch.softmax(step.logits, -1), full[:, 3:])
    rolled = ((keys[:, :, :2, :], values[:, :, :2, :]),)  # a loop's rollback to 2 tokens
    again = model(input_ids=torch.tensor([[2]]), past_key_values=rolled)
    assert torch.allclose(again, model(torch.tensor([[1, 2]]))[:, -1:])
    assert model(torch.tensor([[1]]), use_cache=False).past_key_values is None
    assert model(torch.zeros((1, 0), dtype=torch.int64), past_key_values=prefill.past_key_values).shape == (1, 0, 5)
    assert model.calls == 7 and model.device == torch.device("cpu")


def test_a_transformers_cache_is_updated_in_place_and_an_attention_mask_pads(model):
    transformers = pytest.importorskip("transformers")
    cache = transformers.DynamicCache()
    first = model(input_ids=torch.tensor([[1, 2]]), past_key_values=cache, use_cache=True)
    second = model(input_ids=torch.tensor([[4]]), past_key_values=first.past_key_values)
    assert second.past_key_values is cache and cache.get_seq_length() == 3
    assert torch.allclose(second, model(torch.tensor([[1, 2, 4]]))[:, -1:])
    masked = model(torch.tensor([[3, 1, 2]]), attention_mask=torch.tensor([[0, 1, 1]]))
    assert torch.allclose(masked, model(torch.tensor([[-1, 1, 2]])))  # a masked position is the checker's -1


def test_the_checkers_own_convention_is_unchanged(model):
    tokens = np.array([[1, 2, -1]])
    assert isinstance(model(tokens), np.ndarray)
    out = model(torch.as_tensor(tokens))
    assert isinstance(out, torch.Tensor) and np.allclose(out.numpy(), model(tokens))
    assert type(out[:, -1] * 2) is torch.Tensor  # operations give plain tensors


def _loop(prefix, approx_model, target_model, max_len, gamma=4, temperature=1.0):
    """The calling convention of a classic loop (prompt tensor [1, P] in, prompt and continuation out): samples the
    target directly, so it is exact."""
    for _ in range(max_len):
        law = target_model(prefix).logits[:, -1].div(temperature).softmax(-1)
        prefix = torch.cat([prefix, torch.multinomial(law, 1)], dim=1)
    return prefix


def test_the_classic_loop_adapter_finds_the_roles_by_name_and_keeps_the_new_tokens(model):
    generate = from_classic_loop(_loop, temperature=1.0)
    prompts = np.array([[-1, 2, 4], [-1, -1, -1]])  # an empty prompt: the loop is handed [-1]
    out = generate(target=model, draft=model, prompts=prompts, max_new_tokens=3, gamma=2,
                   generator=np.random.default_rng(0))
    assert out.shape == (2, 3) and ((out >= 0) & (out < 5)).all() and (out != 3).all()  # token 3 is impossible
    again = generate(target=model, draft=model, prompts=prompts, max_new_tokens=3, gamma=2,
                     generator=np.random.default_rng(0))
    assert (out == again).all()  # the global torch RNG is seeded from the contract's generator


def test_the_classic_loop_adapter_says_which_role_it_cannot_find():
    def loop(tokens, big, small, n):
        return tokens

    with pytest.raises(AdapterSignatureError, match="the prompt .*from_classic_loop\\(fn, prompt="):
        from_classic_loop(loop)
    with pytest.raises(AdapterSignatureError, match="'ssm' is not a parameter"):
        from_classic_loop(_loop, names={"draft": "ssm"})
    with pytest.raises(ValueError, match="returns must be"):
        from_classic_loop(_loop, returns="all")


def _one_token_late(prefix, approx_model, target_model, max_len, gamma=4):
    """The same loop reading the law one position early (a cache/position bug)."""
    for _ in range(max_len):
        logits = target_model(prefix).logits
        law = logits[:, -2 if logits.shape[1] > 1 else -1].softmax(-1)
        prefix = torch.cat([prefix, torch.multinomial(law, 1)], dim=1)
    return prefix


@pytest.mark.slow  # a loop called a row at a time: ~15 s
def test_a_classic_loop_checked_unmodified_passes_exact_and_fails_a_position_bug():
    from specdec_check import check_generator
    from specdec_check.scenarios import default_generator_battery

    scenarios = [s for s in default_generator_battery() if s.name == "small-joint"]
    laws = ("contract", "joint")  # these loops sample the target alone: no speedup to check
    exact = check_generator(from_classic_loop(_loop), scenarios=scenarios, mode="quick", seed=0, checks=laws)
    assert exact.verdict == "passed", exact.summary()
    late = check_generator(from_classic_loop(_one_token_late), scenarios=scenarios, mode="quick", seed=0,
                           checks=laws)
    assert late.verdict == "failed", late.summary()


def test_a_continuation_that_starts_like_its_prompt_is_not_mistaken_for_the_whole_sequence(model):
    def new_tokens_only(prefix, approx_model, target_model, max_len, gamma):
        return [int(prefix[0, 0])] * max_len  # the continuation alone, repeating the prompt's token

    out = from_classic_loop(new_tokens_only)(target=model, draft=model, prompts=np.array([[2]]), max_new_tokens=3,
                                             gamma=2, generator=np.random.default_rng(0))
    assert out.tolist() == [[2, 2, 2]]


def test_once_a_row_proves_the_loop_returns_its_continuation_every_later_row_is_read_so(model):
    def overshooting(prefix, approx_model, target_model, max_len, gamma):
        first = int(prefix[0, -1])
        return [(first + 1) % 5] * 2 if first == 4 else [first] * (max_len + 2)  # continuation, too long

    generate = from_classic_loop(overshooting)
    kwargs = dict(target=model, draft=model, max_new_tokens=3, gamma=2, generator=np.random.default_rng(0))
    assert generate(prompts=np.array([[4]]), **kwargs).tolist() == [[0, 0, -1]]  # not the prompt: a continuation
    assert generate(prompts=np.array([[2]]), **kwargs).tolist() == [[2, 2, 2]]  # starts like its prompt: kept


def test_the_checkers_models_need_no_torch_for_the_checkers_own_convention():
    import subprocess
    import sys

    code = ("import sys\n"
            "class Blocked:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'torch':\n"
            "            raise ImportError('torch is not installed here')\n"
            "sys.meta_path.insert(0, Blocked())\n"
            "import numpy as np\n"
            "from specdec_check.checker.generator.caller import CountingModel\n"
            "from specdec_check.models import MarkovModel\n"
            "m = CountingModel(MarkovModel(np.full((3, 2), 0.5)))\n"
            "print(m([[0, 1]]).shape, m(tokens=np.array([[1]])).shape)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "(1, 2, 2) (1, 1, 2)", out.stderr[-2000:]


def test_a_loop_that_sets_attributes_on_its_counted_target_sets_them_on_the_target():
    from specdec_check.checker.model_loop.caller import TargetCounter

    class Callable:
        def __call__(self, tokens):
            return tokens

    target = Callable()
    counter = TargetCounter(target)
    proxy = counter.wrapped()
    proxy.cache_state = "warm"
    proxy(1)
    assert target.cache_state == "warm" and counter.calls == 1
