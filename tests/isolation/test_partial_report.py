"""Reports the supervisor assembles (timeout, crash, interrupted): the verdict rule and the schema."""

from __future__ import annotations

import shlex

import pytest

from specdec_check._isolation import (
    assemble_report,
    crash_finding,
    interrupt_finding,
    repro_line,
    timeout_finding,
    verdict_of,
)
from specdec_check.checker import check_verifier
from specdec_check.report import render_html, render_markdown, render_text, validate_report
from specdec_check.samplers import numpy_verify
from specdec_check.scenarios import default_verifier_battery

SMALL = ("corpus-bigram", "disjoint-supports")


@pytest.fixture(scope="module")
def run():
    """A real report and the parts a monitor would have sent for it."""
    report = check_verifier(numpy_verify, scenarios=[s for s in default_verifier_battery() if s.name in SMALL],
                            mode="quick", seed=0)
    data = report.to_dict()
    header = {k: data[k] for k in ("report_version", "kind", "sampler", "mode", "backend", "device", "dtype",
                                   "tolerance", "seed", "alpha", "alpha_per_check", "design_tv", "checks", "strict",
                                   "screen", "rule")}
    parts = [{"index": i, "findings": [f for f in data["findings"] if f["scenario"] == s["name"]],
              "records": [r for r in data["results"] if r["scenario"] == s["name"]], "summary": s}
             for i, s in enumerate(data["scenarios"])]
    return data, header, parts


def _strip(data):
    return {k: v for k, v in data.items() if k != "elapsed_s"}


def test_all_parts_and_no_extra_finding_rebuild_the_report(run):
    data, header, parts = run
    rebuilt = assemble_report(header, parts, [], elapsed_s=data["elapsed_s"])
    assert rebuilt == data and list(rebuilt) == list(data)  # same content, same key order


@pytest.mark.parametrize("make, verdict", [
    (lambda: timeout_finding(timeout_s=2.0, call=("disjoint-supports", 3), completed=1, planned=list(SMALL)),
     "failed"),
    (lambda: crash_finding(how="exited with status 0", call=("disjoint-supports", 3), scenario="disjoint-supports",
                           completed=1, planned=list(SMALL)), "failed"),
    (lambda: crash_finding(how="raised SystemExit (sys.exit(0))", call=None, scenario=None, completed=0,
                           planned=[], facts={"type": "SystemExit", "message": "0", "traceback": "..."}), "failed"),
    (lambda: interrupt_finding(signal_name="SIGINT", call=None, scenario="disjoint-supports", completed=1,
                               planned=list(SMALL)), "interrupted"),
], ids=["timeout", "crash", "crash-before-start", "interrupted"])
def test_partial_reports_never_pass_and_match_the_schema(run, make, verdict):
    data, header, parts = run
    finding = make()
    partial = assemble_report(header, parts[:1], [finding], elapsed_s=1.5,
                              verdict="interrupted" if verdict == "interrupted" else None)
    assert partial["passed"] is False and partial["verdict"] == verdict
    assert validate_report(partial) is partial
    assert [s["name"] for s in partial["scenarios"]] == ["screen"]  # the screen runs first
    assert partial["samples_used"] == parts[0]["summary"]["samples"] and partial["elapsed_s"] == 1.5
    assert partial["findings"][-1] is finding and finding["kind"] == "failure"
    text = render_text(partial)
    assert f"verdict: {verdict.upper()}" in text and finding["message"].split(";")[0] in text
    assert verdict.upper() in render_markdown(partial) and verdict.upper() in render_html(partial, plots=False)


def test_findings_say_what_happened():
    timeout = timeout_finding(timeout_s=2.0, call=("s", 4), completed=1, planned=["a", "s"], repro="r")
    assert timeout["message"].startswith("the sampler did not return within 2 s (call 4 of scenario 's'); ")
    assert timeout["evidence"] == {"timeout_s": 2.0, "scenarios_completed": 1, "scenarios_planned": 2, "call": 4,
                                   "scenario": "s"}
    crash = crash_finding(how="was killed by signal SIGKILL (9)", call=None, scenario="a", completed=0,
                          planned=["a"])
    assert crash["message"].startswith("the code under test was killed by signal SIGKILL (9) in scenario 'a' "
                                       "(outside a sampler call)")
    early = crash_finding(how="exited with status 0", call=None, scenario=None, completed=0, planned=[])
    assert "before the first scenario started" in early["message"] and early["scenario"] == ""
    stop = interrupt_finding(signal_name="SIGTERM", call=("s", 2), scenario="s", completed=1, planned=["a", "s"])
    assert stop["message"].startswith("the run was interrupted by SIGTERM during call 2 of scenario 's'")


@pytest.mark.parametrize("findings, expected", [
    ([], ("passed", True)),
    ([{"kind": "warning"}], ("passed", True)),
    ([{"kind": "inefficiency"}], ("inefficient", True)),
    ([{"kind": "inefficiency"}, {"kind": "failure"}], ("failed", False)),
])
def test_verdict_rule(findings, expected):
    assert verdict_of(findings) == expected


def test_an_override_verdict_never_passes_with_a_failure(run):
    _, header, parts = run
    failure = {"kind": "failure", "check": "x", "scenario": "", "message": "m", "evidence": {}, "repro": ""}
    assert assemble_report(header, parts, [failure], elapsed_s=0.0, verdict="passed")["passed"] is False


def test_repro_line_is_shell_quoted_and_complete():
    options = {"mode": "quick", "seed": 3, "alpha": 1e-3, "scenarios": "my mod:list", "backend": "torch",
               "device": "cuda:0", "dtype": "float16", "checks": ("contract", "first_token"), "timeout": 2.5}
    name = "my scenario $(touch X) `id`"
    line = repro_line("verify", "pkg.mod:verify", options, name)
    assert shlex.split(line) == ["specdec-check", "verify", "pkg.mod:verify", "--mode", "quick", "--seed", "3",
                                 "--scenarios", "my mod:list", "--scenario", name, "--alpha", "0.001", "--checks",
                                 "contract,first_token", "--backend", "torch", "--device", "cuda:0", "--dtype",
                                 "float16", "--timeout", "2.5"]
    assert repro_line("generate", "m:g", {"mode": "quick", "seed": 0, "backend": "numpy"}) == \
        "specdec-check generate m:g --mode quick --seed 0"
