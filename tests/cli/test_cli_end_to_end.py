"""End to end: ``python -m specdec_check verify/generate/mutants/demo`` in subprocesses, on small batteries."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema")

from specdec_check.report import load_report, report_schema  # noqa: E402

HERE = Path(__file__).resolve().parent


def checker_available(kind="verifier"):
    try:
        from specdec_check import checker
    except ImportError:
        return False
    return hasattr(checker, "check_verifier" if kind == "verifier" else "check_generator")


SMALL = ("--mode", "quick", "--scenarios", "specdec_small_battery:verifier")
BUG = "specdec_check.bugs:resample_from_target"

needs_verifier = pytest.mark.skipif(not checker_available("verifier"), reason="check_verifier is not available yet")
needs_generator = pytest.mark.skipif(not checker_available("generator"), reason="check_generator is not available yet")


def _without_timings(value):
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k != "elapsed_s"}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _validate(path):
    data = json.loads(path.read_text())
    jsonschema.validate(data, report_schema(), cls=jsonschema.Draft202012Validator)
    assert load_report(path) == data
    return data


@needs_verifier
def test_verify_reference_passes_and_writes_default_report(cli, tmp_path):
    proc = cli("verify", *SMALL, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().splitlines()[-4] == "verdict: PASSED"
    folder = tmp_path / "reports" / "specdec_check.samplers.numpy_verify-quick-seed0"
    for name in ("report.json", "report.md", "report.html"):
        assert (folder / name).is_file(), name
        assert f"report: reports/specdec_check.samplers.numpy_verify-quick-seed0/{name}" in proc.stdout
    data = _validate(folder / "report.json")
    assert data["passed"] and data["verdict"] == "passed" and data["mode"] == "quick"
    assert [s["name"] for s in data["scenarios"]] == ["screen", "corpus-bigram", "disjoint-supports"]
    assert "<img" in (folder / "report.html").read_text()
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


@needs_verifier
def test_same_seed_same_json(cli, tmp_path):
    runs = []
    for i in range(2):
        proc = cli("verify", *SMALL, "--seed", "3", "--report", tmp_path / f"run{i}", "--format", "json", "-q")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[0].endswith(": PASSED")
        runs.append(json.loads((tmp_path / f"run{i}" / "report.json").read_text()))
    assert not (tmp_path / "run0" / "report.md").exists()
    assert _without_timings(runs[0]) == _without_timings(runs[1])
    assert runs[0]["seed"] == 3


@needs_verifier
def test_catalogued_bug_fails_with_evidence_and_a_repro_that_reproduces(cli, tmp_path):
    proc = cli("verify", BUG, *SMALL, "--report", tmp_path / "bug", "--no-plots")
    assert proc.returncode == 1, proc.stderr
    assert "verdict: FAILED" in proc.stdout and "repro: " in proc.stdout
    data = _validate(tmp_path / "bug" / "report.json")
    failures = [f for f in data["findings"] if f["kind"] == "failure"]
    assert failures and all(f["evidence"] and f["repro"] for f in failures)
    html = (tmp_path / "bug" / "report.html").read_text()
    md = (tmp_path / "bug" / "report.md").read_text()
    for f in failures:
        assert f["repro"] in md
    assert "Reproduce:" in html and "Evidence:" in html

    argv = shlex.split(failures[0]["repro"])
    assert argv[0] in ("specdec-check", "python") and "verify" in argv
    args = argv[argv.index("verify"):]
    again = cli(*args, "--no-report", "--no-progress")
    assert again.returncode == 1, again.stderr
    assert "verdict: FAILED" in again.stdout


@needs_verifier
def test_sampler_that_raises_is_a_failure(cli, tmp_path):
    (tmp_path / "raiser.py").write_text(
        "def verify(*, draft_token_ids, draft_probs, target_probs, generator):\n    raise IndexError('boom')\n")
    proc = cli("verify", "raiser:verify", *SMALL, "--no-report")
    assert proc.returncode == 1
    assert "IndexError" in proc.stdout + proc.stderr


@needs_verifier
def test_verifier_breaking_the_contract_signature(cli, tmp_path):
    (tmp_path / "wrong.py").write_text("def verify(ids, q, p, rng):\n    return ids\n")
    proc = cli("verify", "wrong:verify", *SMALL, "--no-report")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith("specdec-check verify: error: TypeError: ")


@needs_verifier
def test_verify_does_not_import_torch_or_tqdm_off_terminal(tmp_path):
    code = (
        "import sys\nfrom specdec_check._cli import main\n"
        f"rc = main(['verify', *{list(SMALL)!r}, '--checks', 'contract,first_token', '--no-report', '-q'])\n"
        "assert rc == 0, rc\nassert 'torch' not in sys.modules and 'tqdm' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(HERE)})


@needs_generator
def test_generate_reference_passes(cli, tmp_path):
    proc = cli("generate", "--mode", "quick", "--scenarios", "specdec_small_battery:generator", "--no-progress",
               "--format", "json,md")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    data = _validate(tmp_path / "reports" / "specdec_check.samplers.numpy_generate-quick-seed0" / "report.json")
    assert data["kind"] == "generator" and data["passed"]


@needs_generator
def test_mutants_on_two_entries(cli):
    proc = cli("mutants", "resample_from_target", "--mode", "quick", "--no-progress", timeout=600)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "resample_from_target" in proc.stdout


def test_demo(cli):
    try:
        from specdec_check._demo import run_demo  # noqa: F401
    except ImportError:
        pytest.skip("specdec_check._demo is not available yet")
    proc = cli("demo", "--tokens", "2000", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


@needs_verifier
def test_verify_torch_backend(cli, tmp_path):
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    proc = cli("verify", "--backend", "torch", *SMALL, "--checks", "contract,impossible,first_token",
               "--format", "json", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    data = _validate(tmp_path / "reports" / "specdec_check.samplers.torch_verify-quick-seed0" / "report.json")
    assert data["backend"] == "torch" and data["sampler"].endswith(":torch_verify")
