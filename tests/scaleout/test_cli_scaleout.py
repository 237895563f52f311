"""Issue 21 on the command line: --workers N and --scheduler ADDRESS write the same report.json as a run
in one process (timings aside); the pytest suite under pytest-xdist spends one budget split by test id."""

from __future__ import annotations

import json

import pytest
from scaleout_helpers import without_timings

pytest_plugins = ["pytester"]

ARGS = ("verify", "--mode", "quick", "--scenarios", "scaleout_samplers:verifier_scenarios", "--no-progress",
        "--format", "json")


def _report(folder):
    return without_timings(json.loads((folder / "report.json").read_text()))


def test_workers_and_a_dask_scheduler_write_the_same_report(cli, tmp_path):
    distributed = pytest.importorskip("distributed")
    here = cli(*ARGS, "--report", "here")
    two = cli(*ARGS, "--report", "two", "--workers", "2")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                                  protocol="tcp") as cluster:  # reachable from the command line's process
        dask = cli(*ARGS, "--report", "dask", "--scheduler", cluster.scheduler_address)
    for proc in (here, two, dask):
        assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    reference = _report(tmp_path / "here")
    assert reference["verdict"] == "passed" and len(reference["scenarios"]) == 4
    assert _report(tmp_path / "two") == reference
    assert _report(tmp_path / "dask") == reference


def test_workers_and_scheduler_are_exclusive_and_checked(cli):
    both = cli(*ARGS, "--no-report", "--workers", "2", "--scheduler", "tcp://127.0.0.1:8786")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    zero = cli(*ARGS, "--no-report", "--workers", "0")
    assert zero.returncode == 2 and "expected a positive integer" in zero.stderr


SUITE = ("--pyargs", "specdec_check.suite", "--hypothesis-profile=specdec-quick", "-p", "no:cacheprovider",
         "-W", "ignore::DeprecationWarning", "-k", "first_token or contract or accepted_count")


def test_the_suite_under_xdist_spends_one_budget_split_by_test_id(pytester):
    pytest.importorskip("xdist")
    serial = pytester.runpytest_subprocess(*SUITE)
    spread = pytester.runpytest_subprocess(*SUITE, "-n", "2")
    assert serial.ret == 0 and spread.ret == 0, spread.stdout.str()[-3000:]
    assert serial.parseoutcomes()["passed"] == spread.parseoutcomes()["passed"] >= 4
    spread.stdout.fnmatch_lines(["specdec-check: pytest-xdist with 2 workers: one false-alarm budget alpha=1e-06 for "
                                 "the whole session*fixed by its test id*"])
    # The same examples spend the same shares: the serial line's numbers are the sum over the workers.
    spent_serial = next(line for line in serial.outlines if line.startswith("specdec-check: spent alpha"))
    spent_spread = next(line for line in spread.outlines if line.startswith("specdec-check: spent alpha"))
    assert spent_spread.startswith(spent_serial + " over 2 pytest-xdist workers (one ledger, split by test id)")


def test_a_target_resolution_on_the_command_line(cli, tmp_path):
    # --tv sizes the law tests: the report says the design TV reached, the default folder and every repro
    # line carry it, and a resolution outside (0, 1) is a usage error.
    run = cli(*ARGS, "--tv", "0.1", "--workers", "2")
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    folders = list((tmp_path / "reports").iterdir())
    assert [f.name for f in folders] == ["specdec_check.samplers.numpy_verify-quick-tv0.1-seed0"]
    report = json.loads((folders[0] / "report.json").read_text())
    assert report["design_tv"] == 0.1 and report["verdict"] == "passed" and report["achieved_tv"] <= 0.1
    assert cli(*ARGS, "--report", "q").returncode == 0
    quick = json.loads((tmp_path / "q" / "report.json").read_text())

    def law_rows(data):
        return sum(r["n"] for r in data["results"] if r["check"] == "accepted_count")

    # More law rows, and a resolution the plain quick run does not reach.
    assert law_rows(report) > law_rows(quick) and quick["achieved_tv"] > 0.1 >= report["achieved_tv"]
    for bad in ("0", "1.5", "x"):
        refused = cli(*ARGS, "--no-report", "--tv", bad)
        assert refused.returncode == 2 and "--tv" in refused.stderr, bad


def test_a_sampler_exiting_on_a_worker_names_its_scenario(cli, tmp_path):
    # sys.exit in a worker process ends the run: the partial report says which scenario it came from (not
    # the label of the last shard that finished elsewhere).
    run = cli("verify", "scaleout_samplers:exits_on_many_rows", *ARGS[1:], "--report", "out", "--workers", "2")
    assert run.returncode == 1, (run.stdout[-2000:], run.stderr[-2000:])
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    crash = [f for f in report["findings"] if f["check"] == "crash"]
    assert len(crash) == 1 and "a bug that only V = 33 reaches" in crash[0]["message"], report["findings"]
    assert "'many-rows'" in crash[0]["message"] and " done" not in crash[0]["message"], crash[0]["message"]
