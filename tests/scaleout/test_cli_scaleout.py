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
