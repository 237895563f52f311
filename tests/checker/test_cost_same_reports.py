"""Issue 31's cheaper paths give the reports of the paths they replace, passing and failing samplers alike: the
seeds of a block drawn at once with their generators made together (against one seed and one generator per call),
and the batch-invariance check's rows screened and their PITs added per draw (against the per-row loop it was)."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_check import check_verifier, samplers
from specdec_check.bugs import entry
from specdec_check.checker.backends.base import NumpyBackend
from specdec_check.checker.chain import kind as chain_kind
from specdec_check.checker.chain.contract import parse_step
from specdec_check.checker.chain.randomness import BATCH_BINS, BATCH_MIN_CALLS, RANDOMNESS_SHARE, BatchInvariance
from specdec_check.checker.core.tally import PitTally
from specdec_check.exact.kernels import acceptance, step_law_given_acceptance
from specdec_check.scenarios import default_verifier_battery

BATTERY = {s.name: s for s in default_verifier_battery()}


def _report(sampler, names, **options):
    report = check_verifier(sampler, scenarios=[BATTERY[n] for n in names], seed=3, mode="quick", **options).to_dict()

    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "elapsed_s"}
        return [strip(v) for v in value] if isinstance(value, list) else value
    return strip(report)


def _failing_at(call, how):
    count = [0]

    def verify(**kw):
        count[0] += 1
        if count[0] == call:
            if how == "raise":
                raise RuntimeError(f"call {call}")
            return np.full((kw["draft_token_ids"].shape[0], 1), -1)  # malformed: the wrong width
        return samplers.numpy_verify(**kw)
    return verify


SAMPLERS = {"exact": lambda: samplers.numpy_verify, "raises at call 40": lambda: _failing_at(40, "raise"),
            "malformed at call 75": lambda: _failing_at(75, "malformed"),
            "uniform shared by rows": lambda: entry("rows_share_uniforms").sampler}


@pytest.mark.parametrize("name", SAMPLERS)
def test_seeds_drawn_per_block_give_the_reports_of_seeds_drawn_per_call(name, monkeypatch):
    names = ["draft-zeros", "low-acceptance"]  # blocks of 64 one-row calls, and of a few 16-row calls
    batched = _report(SAMPLERS[name](), names)
    monkeypatch.setattr(NumpyBackend, "PREPARE_MIN_SEEDS", 10**9)  # every seed drawn as its call comes
    assert _report(SAMPLERS[name](), names) == batched


class _RowByRow(BatchInvariance):
    """The batch-invariance check as it was before issue 31: each row judged and added on its own."""

    def finish(self) -> None:
        ctx, caller, s = self.ctx, self.caller, self.ctx.scenario
        if ctx.stopped or "batch_invariance" not in ctx.planned:
            return
        tally = PitTally(s.name, "batch_invariance", bins=min(ctx.mode.pit_bins, BATCH_BINS),
                         alpha=ctx.spend("batch_invariance"), sequential=False)
        pit_rng = np.random.default_rng(ctx.rng.integers(2**63))
        budget = max(BATCH_MIN_CALLS, ctx.mode.max_calls // RANDOMNESS_SHARE)
        for _ in range(max(1, budget // s.rows_per_call + 1)):
            draw = caller.draw(rows=budget)
            used = min(s.rows_per_call, budget)
            laws = step_law_given_acceptance(acceptance(draw.draft_token_ids[:used], draw.draft_probs[:used],
                                                        draw.target_probs[:used]),
                                             draw.draft_probs[:used], draw.target_probs[:used]).reshape(used, -1)
            for b in range(used):
                one = draw.head(slice(b, b + 1))
                out = caller.call_host(one, ctx.next_seed(), "batch_invariance")
                if out is None:
                    return
                step = parse_step(out, one.draft_token_ids)
                if step.final[0] < 0:
                    continue
                if self._impossible(one, step):
                    return
                try:
                    tally.add(step.accepted * s.vocab_size + step.final, laws[b:b + 1], pit_rng)
                except ValueError as exc:
                    ctx.recorder.failure("impossible", f"in a single-row call: {exc}")
                    return
            budget -= min(s.rows_per_call, budget)
            if budget <= 0:
                break
        ctx.recorder.record(tally.record(extra_details={"rows_per_call": 1}))


def _one_hot_rows():
    """Rows where a bonus read from the wrong row is an event of probability zero in a single-row call."""
    from specdec_check.scenarios import VerifierScenario

    target = np.tile(np.array([[[1.0, 0.0], [0.0, 1.0]]]), (64, 1, 1))
    draft = np.tile(np.array([[[1.0, 0.0]]]), (64, 1, 1))
    return VerifierScenario.from_rows("one-hot", target_probs=target, draft_probs=draft)


@pytest.mark.parametrize("name", ["exact", "bonus_from_wrong_row", "residual_swapped", "raises at call 130"])
def test_the_batch_invariance_check_reports_what_its_row_by_row_loop_reported(name, monkeypatch):
    def sampler():
        if name == "exact":
            return samplers.numpy_verify
        return _failing_at(130, "raise") if name == "raises at call 130" else entry(name).sampler

    scenarios = [BATTERY["low-acceptance"], BATTERY["target-equals-draft"], _one_hot_rows()]

    def report():
        out = check_verifier(sampler(), scenarios=scenarios, seed=3, mode="quick",
                             checks=["batch_invariance", "contract"]).to_dict()
        out.pop("elapsed_s")
        for s in out["scenarios"]:
            s.pop("elapsed_s")
        return out

    now = report()
    monkeypatch.setattr(chain_kind, "SCENARIO_CHECKS",
                        tuple(_RowByRow if c is BatchInvariance else c for c in chain_kind.SCENARIO_CHECKS))
    assert report() == now
    records = [r for r in now["results"] if r["check"] == "batch_invariance"]
    failures = [f["message"] for f in now["findings"] if f["kind"] == "failure"]
    assert records or failures  # the check ran: its record, or the finding that stopped it
    if name == "bonus_from_wrong_row":  # the screen let the impossible row through, as the per-row loop found it
        assert any(m.startswith("in a single-row call: 1 row(s) emitted a bonus token") for m in failures), failures
