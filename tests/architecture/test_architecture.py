"""The package's shape: no import cycles, and a pytest plugin that costs nothing when unused."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cycles_tool():
    spec = importlib.util.spec_from_file_location("_import_cycles", ROOT / "benchmarks" / "import_cycles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycles():
    tool = _cycles_tool()
    edges = tool.import_graph(str(ROOT))
    assert len(edges) > 50  # the whole package was read
    assert tool.strongly_connected(edges) == []


def test_cycle_finder_finds_a_cycle(tmp_path):
    package = tmp_path / "specdec_check"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_a.py").write_text("from ._b import B\n")
    (package / "_b.py").write_text("def f():\n    from ._a import A\n")
    (tmp_path / "strategies").mkdir()
    tool = _cycles_tool()
    assert tool.strongly_connected(tool.import_graph(str(tmp_path))) == [["specdec_check._a", "specdec_check._b"]]


def test_a_plain_pytest_run_loads_no_numpy_hypothesis_or_internals(tmp_path):
    # An unrelated project in an environment where specdec-check is installed: the plugin loads
    # (entry point), but neither numpy, Hypothesis, nor any specdec_check module beyond the
    # standard-library-only settings and option tables and session state.
    (tmp_path / "test_unrelated.py").write_text(
        "import sys\n\n"
        "def test_modules():\n"
        "    loaded = sorted(m for m in sys.modules if m.startswith('specdec_check'))\n"
        "    print('LOADED', loaded, 'numpy' in sys.modules, 'hypothesis' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_unrelated.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("LOADED"))
    assert line == ("LOADED ['specdec_check', 'specdec_check._options', 'specdec_check._settings', "
                    "'specdec_check.pytest_plugin', "
                    "'specdec_check.suite', 'specdec_check.suite._session'] False False"), line


def test_progress_bars_and_plots_come_with_the_package():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {dep.split(">")[0].split("=")[0].strip() for dep in project["dependencies"]}
    assert {"matplotlib", "tqdm"} <= names  # `pip install -e .` gives progress bars and plots
    assert {"plots", "progress"} <= set(project["optional-dependencies"])  # the old extras still resolve
