"""Issue 21: a worker killed mid-run (SIGKILL, as the OOM killer sends) loses no shard silently: the
run reruns the lost shards from their seeds and finishes with the same report, or fails naming the
scenarios whose shards were lost."""

from __future__ import annotations

import concurrent.futures as cf
import json

import pytest
from scaleout_helpers import without_timings
from scaleout_samplers import MARKER_ENV, always_dies, dies_once, verifier_scenarios

from specdec_check import check_verifier
from specdec_check.checker.core.executors import POOL_RESTARTS, ShardsLost


def _json(report) -> str:
    return json.dumps(without_timings(report.to_dict()), sort_keys=True)


@pytest.fixture
def marker(tmp_path, monkeypatch):
    path = tmp_path / "died"
    monkeypatch.setenv(MARKER_ENV, str(path))
    return path


def test_a_pool_the_run_owns_reruns_the_lost_shards_and_gives_the_same_report(marker):
    sharded = check_verifier(dies_once, scenarios=verifier_scenarios(), mode="quick", executor=2)
    assert marker.exists()  # a worker did die
    reference = check_verifier(dies_once, scenarios=verifier_scenarios(), mode="quick")  # marker set: no death
    assert reference.verdict == "passed"
    assert _json(sharded) == _json(reference)


def test_a_sampler_that_kills_every_worker_fails_the_run_naming_the_scenarios():
    with pytest.raises(ShardsLost) as caught:
        check_verifier(always_dies, scenarios=verifier_scenarios(), mode="quick", executor=2)
    message = str(caught.value)
    assert f"died {POOL_RESTARTS + 1} times" in message and "executor=None" in message
    assert all(repr(name) in message for name in ("screen", "corpus-bigram", "low-acceptance", "many-rows"))


def test_a_users_broken_pool_fails_the_run_naming_the_lost_scenarios(marker):
    with cf.ProcessPoolExecutor(max_workers=2) as pool:  # the user's: the run cannot rebuild it
        with pytest.raises(ShardsLost, match=r"were lost: a worker running them was lost \(BrokenProcessPool") as caught:
            check_verifier(dies_once, scenarios=verifier_scenarios(), mode="quick", executor=pool)
    assert "'many-rows'" in str(caught.value)  # the last scenario cannot have finished before the first call died


def test_a_dask_cluster_reschedules_the_lost_shard_and_gives_the_same_report(marker):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  env={MARKER_ENV: str(marker)}) as cluster, distributed.Client(cluster) as client:
        sharded = check_verifier(dies_once, scenarios=verifier_scenarios(), mode="quick",
                                 executor=client.get_executor())
    assert marker.exists()
    reference = check_verifier(dies_once, scenarios=verifier_scenarios(), mode="quick")
    assert _json(sharded) == _json(reference)


def test_the_command_line_reports_lost_shards_as_a_failed_run(cli, tmp_path):
    proc = cli("verify", "scaleout_samplers:always_dies", "--mode", "quick", "--scenarios",
               "scaleout_samplers:verifier_scenarios", "--workers", "2", "--no-progress", "--format", "json",
               "--report", "r")
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert "ShardsLost" in proc.stderr and "were lost" in proc.stderr
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    assert data["verdict"] == "failed" and "were lost" in data["findings"][-1]["message"]



@pytest.mark.parametrize("chains", ["plain", "tblib"])
def test_an_unpicklable_base_exception_on_a_worker_comes_back_as_a_remote_exit(chains):
    # Without the wrapper the executor's own pickling error (an AttributeError) reached the command line as
    # an internal error (exit 3, no report); now it is a BaseException naming what the sampler raised. With
    # tblib's pickling support (installed by importing distributed) exceptions pickle with their __context__
    # chain, so the replacement must not carry one.
    if chains == "tblib":
        pytest.importorskip("tblib.pickling_support").install()
    from scaleout_samplers import raises_a_local_base_exception

    from specdec_check.checker.core.executors import RemoteExit

    with pytest.raises(RemoteExit, match=r"raises_a_local_base_exception.<locals>.Abort: abandoned mid-run"):
        check_verifier(raises_a_local_base_exception, scenarios=verifier_scenarios()[:1], mode="quick", executor=2)
