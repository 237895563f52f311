"""check_ragged_verifier: the references pass, every catalogued production bug fails naming its request,
contract breaches and bad options are reported clearly."""

import numpy as np
import pytest

from specdec_check.bugs import RAGGED_BUGS, RAGGED_CONTROLS, catalogue, ragged_mutation_score
from specdec_check.checker import check_ragged_verifier, probe_sampling_conventions
from specdec_check.exact import SamplingProcessing
from specdec_check.samplers import numpy_ragged_verifier, numpy_ragged_verify
from specdec_check.scenarios import RaggedRequest, RaggedScenario, default_ragged_battery
from specdec_check.scenarios._ragged import MIN_LOGIT_GAP, MIN_MASS_MARGIN
from specdec_check.exact import process_logits

BATTERY = {s.name: s for s in default_ragged_battery()}
#: The small scenarios every catalogued bug shows in (mixed calls, draft_probs=None, zero-draft neighbours).
SMALL = [BATTERY[n] for n in ("ragged-mixed-v7", "ragged-ngram-v64", "ragged-zero-drafts-v50")]


def test_numpy_reference_passes_the_whole_battery_in_quick_mode():
    report = check_ragged_verifier(numpy_ragged_verify, mode="quick")
    assert report.passed, report.summary()
    assert {s.name for s in report.scenarios} == set(BATTERY)
    assert {r.check for r in report.results} >= {"greedy", "first_token", "stop_conditional", "accepted_count",
                                                  "step_law", "efficiency", "determinism", "independence",
                                                  "non_finite"}


def test_numpy_reference_passes_default_mode_on_the_mixed_call():
    report = check_ragged_verifier(numpy_ragged_verify, scenarios=[BATTERY["ragged-mixed-v7"]])
    assert report.passed, report.summary()
    first = next(r for r in report.results if r.check == "first_token")
    assert first.n >= 5000  # one sample per random request and fresh call


def test_torch_reference_passes_on_the_torch_backend():
    pytest.importorskip("torch")
    from specdec_check.samplers import torch_ragged_verify

    report = check_ragged_verifier(torch_ragged_verify, scenarios=SMALL + [BATTERY["ragged-greedy-v256"]],
                                   backend="torch", mode="quick")
    assert report.passed, report.summary()
    assert report.dtype == "float32"


@pytest.mark.parametrize("entry", RAGGED_BUGS, ids=lambda e: e.name)
def test_every_catalogued_bug_fails_naming_the_request(entry):
    report = check_ragged_verifier(entry.sampler, scenarios=SMALL, mode="quick")
    assert not report.passed
    failures = report.failures
    assert failures
    for f in failures:
        if f.check in ("contract", "non_finite", "determinism"):
            continue
        assert "request" in f.message and "request" in f.evidence, (f.check, f.message)
    greedy = [f for f in failures if f.check == "greedy"]
    for f in greedy:  # greedy rows: the expected and emitted tokens are shown
        assert "greedy decoding emits" in f.message and "but the verifier emitted" in f.message
        assert f.evidence["expected"] != f.evidence["emitted"]


#: The catalogued bugs that touch greedy requests.
GREEDY_BUGS = ("ragged_greedy_as_random", "ragged_bonus_row_off_by_one", "ragged_zero_draft_reads_neighbour")


@pytest.mark.parametrize("entry", [e for e in RAGGED_BUGS if e.name in GREEDY_BUGS], ids=lambda e: e.name)
def test_greedy_path_bugs_show_up_on_greedy_rows(entry):
    """Bugs that touch greedy requests are caught exactly on them (no statistics)."""
    report = check_ragged_verifier(entry.sampler, scenarios=[BATTERY["ragged-greedy-v256"], BATTERY["ragged-mixed-v7"]],
                                   mode="quick", checks=["contract", "greedy"])
    assert [f.check for f in report.failures] and all(f.check == "greedy" for f in report.failures)


def test_the_exact_control_passes():
    for entry in RAGGED_CONTROLS:
        report = check_ragged_verifier(entry.sampler, scenarios=SMALL, mode="quick")
        assert report.passed, report.summary()


def test_ragged_catalogue_leaves_the_chain_score_alone():
    from specdec_check.bugs import mutation_score

    assert not {e.name for e in RAGGED_BUGS + RAGGED_CONTROLS} & {e.name for e in catalogue()}
    with pytest.raises(KeyError):  # the chain score does not know them
        mutation_score("quick", names=[RAGGED_BUGS[0].name])
    score = ragged_mutation_score("quick", names=["ragged_random_as_greedy", "ragged_exponential_race"])
    assert [r.ok for r in score.rows] == [True, True]
    with pytest.raises(KeyError, match="unknown ragged"):
        ragged_mutation_score("quick", names=["nope"])


def _writes_past_its_tokens(**kw):
    out = numpy_ragged_verify(**kw)
    out = out.copy()
    i = int(np.flatnonzero(kw["num_draft_tokens"] < out.shape[1] - 1)[0])
    out[i, -1] = 0  # a token where the request has no column
    return out


def _wrong_width(**kw):
    return numpy_ragged_verify(**kw)[:, :-1]


def _raises(**kw):
    raise RuntimeError("kernel exploded")


def _writes_into_logits(**kw):
    kw["target_logits"][0, 0] = 0.0
    return numpy_ragged_verify(**kw)


@pytest.mark.parametrize("verify, check, text", [
    (_writes_past_its_tokens, "contract", "emits at most"),
    (_wrong_width, "contract", "output shape"),
    (_raises, "contract", "RuntimeError: kernel exploded"),
    (_writes_into_logits, "contract", "modified"),
])
def test_contract_breaches_are_named(verify, check, text):
    report = check_ragged_verifier(verify, scenarios=[BATTERY["ragged-mixed-v7"]], mode="quick")
    assert not report.passed
    first = report.failures[0]
    assert first.check == check and text in first.message, first.message
    if verify is _writes_past_its_tokens:
        assert first.message.startswith("request ") and "request" in first.evidence


def test_options_are_validated():
    with pytest.raises(NotImplementedError, match="rule='any'"):
        check_ragged_verifier(numpy_ragged_verify, rule="any")
    with pytest.raises(ValueError, match="rule must be one of"):
        check_ragged_verifier(numpy_ragged_verify, rule="lossless")
    with pytest.raises(TypeError, match="contract keyword"):
        check_ragged_verifier(lambda *, draft_token_ids, generator: None)
    with pytest.raises(TypeError, match="RaggedScenario"):
        check_ragged_verifier(numpy_ragged_verify, scenarios=["not a scenario"])
    with pytest.raises(ValueError, match="unknown check"):
        check_ragged_verifier(numpy_ragged_verify, checks=["bonus"])


def test_declared_processing_changes_the_law_and_the_keywords():
    processing = SamplingProcessing(("temperature", "top_p", "top_k", "min_p"))
    scenarios = [RaggedScenario("sglang-order", 7, (
        RaggedRequest(2, 1.0, top_k=2, top_p=0.5), RaggedRequest(1, 0.7, top_k=3, top_p=0.6, min_p=0.2),
        RaggedRequest(0, 0.0), RaggedRequest(3, 1.3, top_k=1, top_p=0.8)) * 4, processing=processing)]
    good = numpy_ragged_verifier(processing)
    assert check_ragged_verifier(good, scenarios=scenarios, mode="quick").passed
    with pytest.raises(TypeError, match="min_p"):  # the vLLM-order reference does not take min_p
        check_ragged_verifier(numpy_ragged_verify, scenarios=scenarios, mode="quick")
    vllm_order_with_min_p = numpy_ragged_verifier(SamplingProcessing(("temperature", "top_k", "top_p", "min_p")))
    report = check_ragged_verifier(vllm_order_with_min_p, scenarios=scenarios, mode="quick")
    assert not report.passed  # top-p on the top-k law is another law
    with pytest.raises(ValueError, match="differs"):
        check_ragged_verifier(good, scenarios=scenarios, processing=SamplingProcessing())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_draws_keep_clear_margins_in_the_samplers_dtype(dtype):
    torch = pytest.importorskip("torch")
    from specdec_check.checker.ragged.caller import casts
    from specdec_check.checker.backends.torch_backend import TorchBackend

    logit_cast, law_rows, param_cast = casts(TorchBackend("cpu", dtype))
    for scenario in default_ragged_battery():
        if scenario.vocab_size > 1000:
            continue
        draw = scenario.draw(np.random.default_rng(1), logit_cast=logit_cast, law_rows=law_rows, param_cast=param_cast)
        as_seen = torch.from_numpy(draw.target_logits).to(getattr(torch, dtype)).double().numpy()
        assert np.array_equal(as_seen, draw.target_logits)  # the laws are those of the logits handed over
        req = draw.layout.row_request
        _, margins = process_logits(draw.target_logits, draw.temperature[req], draw.top_k[req], draw.top_p[req],
                                    margins=True)
        assert (margins["top_k_gap"] >= MIN_LOGIT_GAP).all() and (margins["greedy_gap"] >= MIN_LOGIT_GAP).all()
        assert (margins["top_p_margin"] >= MIN_MASS_MARGIN).all()


def test_probe_reports_the_references_conventions_and_tells_orders_apart():
    assert probe_sampling_conventions(numpy_ragged_verify).answers() == {
        "top_k_ties": "keeps every tied token (logits >= the k-th largest; vLLM)",
        "top_p_crossing": "keeps the token that crosses top_p (smallest set reaching top_p; vLLM, HF)",
        "top_k_top_p_order": "top-p on the law left by top-k, renormalised (vLLM; FlashInfer top_k_first)",
        "temperature_before_top_p": "divides by the temperature first (vLLM, HF)",
    }
    sglang = numpy_ragged_verifier(SamplingProcessing(("temperature", "top_p", "top_k")))
    assert probe_sampling_conventions(sglang).answers()["top_k_top_p_order"].startswith("top-p on the full law")

    def drops_crossing(**kw):  # top-p keeps the tokens strictly inside the nucleus only
        kw = dict(kw)
        return numpy_ragged_verify(**{**kw, "top_p": np.where(kw["top_p"] < 1, kw["top_p"] - 0.15, 1.0)})

    assert probe_sampling_conventions(drops_crossing).answers()["top_p_crossing"].startswith("drops")


def test_law_tests_are_calibrated_on_the_exact_reference():
    """Over 30 seeds the exact reference's law-test p-values are not smaller than uniform ones (one-sided KS
    at 1e-6): the pooled PITs of random requests, their reuse and their attribution keep the tests honest.
    Measured: KS p-values 0.77 (first_token), 1.0, 0.83, 0.99 over 40 seeds."""
    from scipy import stats as sps

    checks = ("first_token", "stop_conditional", "accepted_count", "step_law")
    pvalues = {c: [] for c in checks}
    for seed in range(30):
        report = check_ragged_verifier(numpy_ragged_verify, scenarios=[BATTERY["ragged-mixed-v7"]], mode="quick",
                                       seed=seed, checks=list(checks), alpha=0.5)
        for record in report.results:
            pvalues[record.check].append(record.pvalue)
    for check, values in pvalues.items():
        assert len(values) == 30
        assert sps.kstest(values, "uniform", alternative="greater").pvalue > 1e-6, (check, sorted(values)[:5])


def test_each_requests_pit_bins_add_up_to_the_pooled_bins_edges_included():
    """The per-request PIT bins (which request a deviation comes from) bin exactly as the pooled test
    does: [k/bins, (k+1)/bins), with u = 1 in the last bin."""
    from types import SimpleNamespace

    from specdec_check.checker.ragged.laws import RequestPitTally

    tally = RequestPitTally(SimpleNamespace(name="s"), "first_token", bins=4, alpha=1e-3, num_requests=2,
                            describe=str)
    u = np.array([0.0, 0.25, 0.5, 0.74, 0.75, 0.999, 1.0, 1.0])
    tally.add_requests(u, np.array([0, 0, 0, 0, 1, 1, 1, 0]))
    assert tally.per_request.tolist() == [[1, 1, 2, 1], [0, 0, 0, 3]]
    assert tally.per_request.sum(axis=0).tolist() == tally.counts.tolist() == [1, 1, 2, 4]
