"""The numpy and torch reference ragged verifiers: contract, greedy exactness, processed laws, errors."""

import numpy as np
import pytest

from specdec_check.checker.ragged.block import RaggedBlock
from specdec_check.checker.ragged.contract import check_ragged_output
from specdec_check.exact import process_logits
from specdec_check.samplers import numpy_ragged_verify
from specdec_check.samplers._ragged_numpy import _processed as numpy_processed
from specdec_check.scenarios import RaggedRequest, RaggedScenario, default_ragged_battery

torch = pytest.importorskip("torch")
from specdec_check.samplers import torch_ragged_verify  # noqa: E402
from specdec_check.samplers._ragged_torch import _processed as torch_processed  # noqa: E402

SMALL = [s for s in default_ragged_battery() if s.vocab_size <= 1000]


def _torch_kwargs(draw):
    t = torch.from_numpy
    return {"draft_token_ids": t(draw.draft_token_ids), "num_draft_tokens": t(draw.num_draft_tokens),
            "draft_probs": None if draw.draft_probs is None else t(draw.draft_probs).float(),
            "target_logits": t(draw.target_logits).float(), "temperature": t(draw.temperature).float(),
            "top_k": t(draw.top_k), "top_p": t(draw.top_p).float()}


def _numpy_kwargs(draw):
    return {"draft_token_ids": draw.draft_token_ids, "num_draft_tokens": draw.num_draft_tokens,
            "draft_probs": draw.draft_probs, "target_logits": draw.target_logits, "temperature": draw.temperature,
            "top_k": draw.top_k, "top_p": draw.top_p}


@pytest.mark.parametrize("scenario", SMALL, ids=lambda s: s.name)
def test_greedy_requests_and_contract_on_battery_draws(scenario):
    """Every greedy request emits greedy decoding's output; every request keeps the contract (both references)."""
    rng = np.random.default_rng(11)
    for call in range(5):
        draw = scenario.draw(rng)
        block = RaggedBlock(draw)
        for name, out in (("numpy", numpy_ragged_verify(**_numpy_kwargs(draw), generator=np.random.default_rng(call))),
                          ("torch", torch_ragged_verify(**_torch_kwargs(draw),
                                                        generator=torch.Generator().manual_seed(call)).numpy())):
            problem, _ = check_ragged_output(out, draw.draft_token_ids, draw.layout, scenario.vocab_size)
            assert problem is None, (name, problem)
            if block.greedy.size:
                assert np.array_equal(out[block.greedy], block.greedy_expected), name


@pytest.mark.parametrize("scenario", SMALL + [s for s in default_ragged_battery() if s.vocab_size > 1000][:1],
                         ids=lambda s: s.name)
def test_reference_processing_equals_the_exact_law(scenario):
    """The references' vLLM-style masks (ascending sort, mass <= 1 - p dropped) give the exact processed laws
    on the checker's draws, whose boundaries all have clear margins."""
    draw = scenario.draw(np.random.default_rng(2))
    lay = draw.layout
    rand = np.flatnonzero(draw.temperature[lay.row_request] > 0)
    req = lay.row_request[rand]
    args = (draw.temperature[req], draw.top_k[req], draw.top_p[req])
    exact = process_logits(draw.target_logits[rand], *args)
    np.testing.assert_allclose(numpy_processed(draw.target_logits[rand], *args, None, scenario.processing.order),
                               exact, atol=1e-12)
    got = torch_processed(torch.from_numpy(draw.target_logits[rand]), *(torch.from_numpy(a) for a in args), None,
                          scenario.processing.order).numpy()
    np.testing.assert_allclose(got, exact, atol=1e-12)
    assert np.array_equal(exact > 0, draw.target_probs[rand] > 0)


def test_one_hot_draft_outside_the_top_k_set_is_always_rejected():
    """draft_probs=None: q(x) = 1; a draft the target's top-k drops has p(x) = 0 and is never accepted."""
    logits = np.log(np.array([[0.6, 0.3, 0.1], [0.6, 0.3, 0.1]]))
    kwargs = {"draft_token_ids": np.array([2]), "num_draft_tokens": np.array([1]), "draft_probs": None,
              "target_logits": logits, "temperature": np.array([1.0]), "top_k": np.array([2]), "top_p": np.array([1.0])}
    outs = np.stack([numpy_ragged_verify(**kwargs, generator=np.random.default_rng(s))[0] for s in range(300)])
    assert (outs[:, 0] != 2).all() and (outs[:, 1] == -1).all()
    assert set(outs[:, 0].tolist()) == {0, 1}


def test_outputs_depend_only_on_the_generator():
    scenario = SMALL[0]
    draw = scenario.draw(np.random.default_rng(0))
    a = numpy_ragged_verify(**_numpy_kwargs(draw), generator=np.random.default_rng(7))
    b = numpy_ragged_verify(**_numpy_kwargs(draw), generator=np.random.default_rng(7))
    c = numpy_ragged_verify(**_numpy_kwargs(draw), generator=np.random.default_rng(8))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    ta = torch_ragged_verify(**_torch_kwargs(draw), generator=torch.Generator().manual_seed(7))
    tb = torch_ragged_verify(**_torch_kwargs(draw), generator=torch.Generator().manual_seed(7))
    assert torch.equal(ta, tb)


def _base():
    return {"draft_token_ids": np.array([1, 2]), "num_draft_tokens": np.array([2, 0]), "draft_probs": None,
            "target_logits": np.zeros((4, 3)), "temperature": np.array([1.0, 0.0]), "top_k": np.array([0, 0]),
            "top_p": np.array([1.0, 1.0])}


@pytest.mark.parametrize("change, match", [
    ({"target_logits": np.zeros((3, 3))}, r"\[T \+ B, V\]"),
    ({"draft_token_ids": np.array([1])}, "sum\\(num_draft_tokens\\)"),
    ({"target_logits": np.full((4, 3), np.nan)}, "NaN"),
    ({"draft_probs": np.zeros((3, 3))}, r"draft_probs must be float \[T, V\]"),
    ({"temperature": np.array([-1.0, 0.0])}, "temperature"),
    ({"top_p": np.array([1.5, 1.0])}, "top_p"),
    ({"draft_token_ids": np.array([1, 3])}, r"\[0, 3\)"),
])
def test_bad_inputs_raise_clear_errors(change, match):
    kwargs = {**_base(), **change}
    with pytest.raises(ValueError, match=match):
        numpy_ragged_verify(**kwargs, generator=np.random.default_rng(0))
    t = {k: None if v is None else torch.from_numpy(np.ascontiguousarray(v)) for k, v in kwargs.items()}
    with pytest.raises(ValueError):
        torch_ragged_verify(**t, generator=torch.Generator())


def test_wrong_generator_types_are_refused():
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        numpy_ragged_verify(**_base(), generator=torch.Generator())
    t = {k: None if v is None else torch.from_numpy(v) for k, v in _base().items()}
    with pytest.raises(TypeError, match="torch.Generator"):
        torch_ragged_verify(**t, generator=np.random.default_rng(0))


def test_scenarios_validate_their_requests():
    with pytest.raises(ValueError, match="top_k must be 0"):
        RaggedScenario("bad", 7, (RaggedRequest(1, 1.0, top_k=7),))
    with pytest.raises(ValueError, match="one-hot"):
        RaggedScenario("bad", 7, (RaggedRequest(1, 1.0),), draft_probs_given=False)
    with pytest.raises(ValueError, match="min-p"):
        RaggedScenario("bad", 7, (RaggedRequest(1, 1.0, min_p=0.1),))
    with pytest.raises(ValueError, match="temperature"):
        RaggedScenario("bad", 7, (RaggedRequest(1, -0.5),))
    with pytest.raises(TypeError, match="RaggedRequest"):
        RaggedScenario("bad", 7, ((1, 1.0),))
