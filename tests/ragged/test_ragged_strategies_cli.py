"""The ragged Hypothesis strategies, and the command line's ragged subcommand and ragged mutants."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec_check._cli import main
from specdec_check.checker.ragged.contract import check_ragged_output
from specdec_check.samplers import numpy_ragged_verify
from specdec_check.scenarios._ragged import HEAD_TOKENS
from specdec_check.strategies import RaggedBatch, SampleParams, ragged_batches, sample_params


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.data())
def test_sample_params_stay_where_boundaries_are_clear(data):
    vocab = data.draw(st.sampled_from([2, 5, 64, 50000]))
    params = data.draw(sample_params(vocab_size=vocab))
    assert isinstance(params, SampleParams)
    if params.greedy:
        assert params == SampleParams(0.0)
    else:
        assert 0.3 <= params.temperature <= 2.0 and 0 <= params.top_k < min(vocab, HEAD_TOKENS)
        assert params.top_p == 1.0 or 0.3 <= params.top_p <= 0.95


@settings(max_examples=60, deadline=None, derandomize=True)
@given(ragged_batches(max_requests=5, max_draft_tokens=3))
def test_ragged_batches_are_valid_calls(batch):
    assert isinstance(batch, RaggedBatch)
    kwargs = batch.kwargs()
    lay = batch.draw.layout
    assert kwargs["target_logits"].shape == (lay.num_rows, batch.scenario.vocab_size)
    assert (kwargs["draft_probs"] is None) == (not batch.scenario.draft_probs_given)
    out = numpy_ragged_verify(**kwargs, generator=np.random.default_rng(0))
    assert check_ragged_output(out, kwargs["draft_token_ids"], lay, batch.scenario.vocab_size)[0] is None
    assert "RaggedBatch(vocab_size=" in repr(batch)


def test_ragged_batches_shrink_towards_greedy_requests_without_drafts():
    from hypothesis import find

    smallest = find(ragged_batches(), lambda b: len(b.scenario.requests) >= 2, settings=settings(database=None))
    assert smallest.scenario.vocab_size == 2 and len(smallest.scenario.requests) == 2
    assert all(r.greedy and r.num_draft_tokens == 0 for r in smallest.scenario.requests)


def test_cli_ragged_passes_the_reference(capsys):
    code = main(["ragged", "--mode", "quick", "--no-report", "--no-progress", "-q", "--scenario", "ragged-greedy-v256",
                 "--scenario", "ragged-mixed-v7"])
    assert code == 0
    assert "PASSED" in capsys.readouterr().out


def test_cli_ragged_fails_a_bug_and_reproduces_its_scenario(capsys):
    code = main(["ragged", "specdec_check.bugs:ragged_zero_draft_reads_neighbour", "--mode", "quick", "--no-report",
                 "--no-progress", "--scenario", "ragged-zero-drafts-v50"])
    out = capsys.readouterr().out
    assert code == 1 and "FAILED" in out and "specdec-check ragged" in out


def test_cli_mutants_ragged(capsys):
    code = main(["mutants", "--ragged", "--mode", "quick", "--no-progress", "ragged_greedy_as_random",
                 "ragged_exponential_race"])
    out = capsys.readouterr().out
    assert code == 0 and "2/2" not in out and "1/1 bugs detected, 1/1 controls passed" in out


def test_cli_rejects_an_unknown_ragged_scenario(capsys):
    assert main(["ragged", "--no-report", "--scenario", "nope"]) == 2
    assert "unknown scenario" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["ragged", "--help"], ["mutants", "--help"]])
def test_help_mentions_ragged(argv, capsys):
    assert main(argv) == 0
    assert "ragged" in capsys.readouterr().out


def test_parametrize_with_checks_takes_ragged_verifiers():
    """A user's ragged verifier gets the suite's ragged properties (ids ``<sampler>-<property>``), and the
    reference passes its contract property when the check is called."""
    from specdec_check.samplers import numpy_ragged_verifier
    from specdec_check.suite import parametrize_with_checks
    from specdec_check.suite._ragged_properties import RAGGED_PROPERTIES

    verifier = numpy_ragged_verifier()
    mark = parametrize_with_checks(ragged_verifiers=[verifier], checks=["contract"])
    params = mark.args[1]
    label = getattr(verifier, "__name__", type(verifier).__name__)
    assert [p.id for p in params] == [f"{label}-contract"] and params[0].values[0].prop is RAGGED_PROPERTIES["contract"]
    all_ids = [p.id for p in parametrize_with_checks(ragged_verifiers=[verifier]).args[1]]
    assert all_ids == [f"{label}-{name}" for name in RAGGED_PROPERTIES]
    params[0].values[0]()  # the reference keeps the contract (raises on a violation)
