"""Smoke test of the benchmark harness: `benchmarks/run.py --quick` runs and prints every section.

The benchmarks themselves never run inside the test suite; this only checks that the one
command still works (in a subprocess, with a timeout) and that its report has every heading.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "benchmarks" / "run.py"
#: A hang guard, not a speed claim: --quick took 243 s beside another test worker under coverage (its help
#: says under a minute alone); nothing here judges a time or a ratio (PASS/MISS targets are not asserted).
HANG_GUARD_S = 1800

HEADINGS = (
    "# specdec-check benchmarks",
    "## Machine",
    "## Sampler throughput",
    "## Checker overhead",
    "## Exact oracles: time and memory",
    "## Time to verdict (sequential vs fixed-n)",
    "## Statistical efficiency against the peers' methods",
    "## Scaling of the checker's time",
    "## Targets",
)


@pytest.mark.slow
def test_quick_run_prints_every_section(tmp_path):
    out = tmp_path / "results.md"
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, str(RUN), "--quick", "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for heading in HEADINGS:
        assert heading in proc.stdout, f"missing {heading!r} in the output"
    written = out.read_text()
    for heading in HEADINGS:
        assert heading in written
    assert "PASS" in written or "MISS" in written
    # the quick run writes nothing next to the committed results unless asked to
    assert not (tmp_path / "scaling.png").exists()
