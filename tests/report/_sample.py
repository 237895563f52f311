"""A hand-built CheckReport for renderer and CLI tests (no checker run needed).

Loaded by path from tests/report/conftest.py and tests/cli/conftest.py.
"""

from __future__ import annotations

import numpy as np

from specdec_check.checker.core.report import CheckReport, Finding, ScenarioSummary, TestRecord

EVIL = "<script>alert('x')</script> & \"quoted\" | `tick`"


def sample_report(*, passed: bool = False, sampler: str = f"evil_pkg:{EVIL}") -> CheckReport:
    expected = np.array([0.5, 0.3, 0.15, 0.05])
    observed = np.array([5010, 2990, 1480, 520])
    cond_expected = np.array([[0.6, 0.4, 0.0], [0.2, 0.2, 0.6]])
    cond_observed = np.array([[610, 390, 0], [190, 215, 595]])
    results = [
        TestRecord(scenario="corpus_bigram_w0.5", check="first_token", method="chi-square (lattice)", passed=True,
                   alpha=1e-7, n=10_000, statistic=3.2, pvalue=0.36, bins=4, min_detectable_tv=0.021,
                   tv_plugin=0.006, tv_upper=0.018, details={"observed": observed, "expected": expected}),
        TestRecord(scenario="corpus_bigram_w0.5", check="stop_conditional", method="chi-square", passed=passed,
                   alpha=1e-7, n=2_000, statistic=7.0 if passed else 95.0, pvalue=0.2 if passed else 1e-12, bins=6,
                   min_detectable_tv=0.05, tv_plugin=0.02, tv_upper=0.06,
                   details={"observed": cond_observed, "expected": cond_expected, "note": "per stop position"}),
        TestRecord(scenario=f"rows{EVIL}", check="accepted_count", method="sequential e-value", passed=True,
                   alpha=1e-7, n=4_096, statistic=None, pvalue=None, evalue=3.5, bins=3, min_detectable_tv=0.03,
                   tv_plugin=None, tv_upper=0.04, details={}),
        TestRecord(scenario="corpus_bigram_w0.5", check="contract", method="exact", passed=True, alpha=0.0, n=32),
    ]
    scenarios = [
        ScenarioSummary(name="corpus_bigram_w0.5", description="corpus bigram target, mixed draft", vocab_size=12,
                        gamma=3, rows_per_call=256, calls=40, samples=10_240, acceptance_measured=0.71,
                        acceptance_expected=0.705, tokens_per_step_measured=2.41, tokens_per_step_expected=2.40,
                        elapsed_s=0.5),
        ScenarioSummary(name=f"rows{EVIL}", description=f"fixed rows {EVIL}", vocab_size=4, gamma=2,
                        rows_per_call=64, calls=64, samples=4_096, acceptance_measured=0.4,
                        acceptance_expected=0.41, tokens_per_step_measured=1.55, tokens_per_step_expected=1.57,
                        elapsed_s=0.25),
    ]
    findings = [] if passed else [
        Finding(kind="failure", check="stop_conditional", scenario="corpus_bigram_w0.5",
                message=f"the law of the stop position differs from the exact one {EVIL}",
                evidence={"pvalue": 1e-12, "worst_bin": [1, 1], "observed": cond_observed, "expected": cond_expected},
                repro="python -m specdec_check verify 'evil_pkg:x' --mode quick --seed 0"),
    ]
    findings.append(Finding(kind="warning", check="efficiency", scenario=f"rows{EVIL}", message=f"slow {EVIL}"))
    return CheckReport(
        kind="verifier", sampler=sampler, passed=passed, findings=tuple(findings), results=tuple(results),
        scenarios=tuple(scenarios), mode="quick", backend="numpy", device=None, dtype="float64", tolerance=1e-12,
        seed=0, alpha=1e-6, alpha_per_check=1e-7, samples_used=16_368, elapsed_s=1.25, design_tv=0.05,
        checks=("contract", "first_token", "stop_conditional", "accepted_count", "efficiency"),
    )
