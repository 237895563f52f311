import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_specdec_cli_sample", HERE.parent / "report" / "_sample.py")
sample = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sample)


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("COLUMNS", None)
    return env


@pytest.fixture
def cli(tmp_path):
    """Run ``python -m specdec_check ARGS`` in a subprocess, in ``tmp_path``; return the CompletedProcess."""

    def run(*args, cwd=None, timeout=300):
        return subprocess.run([sys.executable, "-m", "specdec_check", *map(str, args)], cwd=cwd or tmp_path,
                              env=_env(), capture_output=True, text=True, timeout=timeout)

    return run


@pytest.fixture
def saved_report(tmp_path):
    """Write a hand-built report.json (failed or passed) and return its path."""

    def save(passed=False, name="saved"):
        folder = tmp_path / name
        folder.mkdir()
        path = folder / "report.json"
        path.write_text(sample.sample_report(passed=passed).to_json(), encoding="utf-8")
        return path

    return save
