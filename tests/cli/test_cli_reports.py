"""The command line and report folders: --report checked before the run, --force, `report` exit codes and limits."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from specdec_check._cli import main

#: A fast real run: two small scenarios, one check.
FAST = ("--mode", "quick", "--scenarios", "specdec_small_battery:verifier", "--checks", "contract,first_token", "--no-progress",
        "--no-plots")

#: A sampler module that leaves a marker file when it is imported or called: "nothing ran" is its absence.
MARKED = """
import pathlib
pathlib.Path("imported.marker").write_text("x")
from specdec_check.samplers import numpy_verify as _reference


def verify(**kwargs):
    pathlib.Path("called.marker").write_text("x")
    return _reference(**kwargs)
"""

ESCAPES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _package(root, name):
    (root / name).mkdir()
    (root / name / "__init__.py").write_text("")
    (root / name / "kernels.py").write_text("from specdec_check.samplers import numpy_verify as verify\n")


# --------------------------------------------------------------------------- --report checked before the run


@pytest.mark.parametrize("layout", ["file", "under-file", "fifo"])
def test_a_bad_report_folder_is_a_usage_error_and_nothing_runs(cli, tmp_path, layout):
    (tmp_path / "marked.py").write_text(MARKED)
    (tmp_path / "taken").write_text("not a folder")
    if layout == "fifo":
        os.mkfifo(tmp_path / "pipe")
    target = {"file": "taken", "under-file": "taken/sub/dir", "fifo": "pipe"}[layout]
    proc = cli("verify", "marked:verify", *FAST, "--report", target, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"specdec-check verify: error: cannot write the report to {target}")
    assert re.search(r"is a file, not a folder|is under .*taken, which is a file|is a FIFO", proc.stderr)
    assert not (tmp_path / "imported.marker").exists() and not (tmp_path / "called.marker").exists()
    assert (tmp_path / "taken").read_text() == "not a folder"


def test_an_unwritable_report_folder_is_a_usage_error(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    if os.geteuid() == 0:
        try:
            os.mkdir("/sys/specdec-probe")
        except OSError:
            target = "/sys/specdec-report"
        else:  # pragma: no cover - a writable sysfs
            os.rmdir("/sys/specdec-probe")
            pytest.skip("running as root with a writable /sys: no unwritable folder to try")
    else:
        (tmp_path / "locked").mkdir(mode=0o500)
        target = "locked/report"
    assert main(["verify", *FAST, "--report", target]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "cannot write into" in err and len(err.splitlines()) == 1


# --------------------------------------------------------------------------- whose report a folder holds


def test_default_folders_of_two_packages_do_not_collide(cli, tmp_path):
    _package(tmp_path, "pkga")
    _package(tmp_path, "pkgb")
    for pkg in ("pkga", "pkgb"):
        proc = cli("verify", f"{pkg}.kernels:verify", *FAST, "-q")
        assert proc.returncode == 0, proc.stderr
    folders = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert folders == ["pkga.kernels.verify-quick-seed0", "pkgb.kernels.verify-quick-seed0"]
    for pkg, folder in zip(("pkga", "pkgb"), folders):
        stamp = json.loads((tmp_path / "reports" / folder / ".specdec-run.json").read_text())
        assert stamp["run"]["sampler"] == f"{pkg}.kernels:verify"
        assert json.loads((tmp_path / "reports" / folder / "report.json").read_text())["passed"]


def test_another_run_needs_force_and_the_same_run_overwrites(cli, tmp_path):
    _package(tmp_path, "pkga")
    _package(tmp_path, "pkgb")
    first = cli("verify", "pkga.kernels:verify", *FAST, "--report", "out", "-q")
    assert first.returncode == 0, first.stderr
    again = cli("verify", "pkga.kernels:verify", *FAST, "--report", "out", "-q")  # the same command: overwrites
    assert again.returncode == 0, again.stderr
    other = cli("verify", "pkgb.kernels:verify", *FAST, "--report", "out", "-q")
    assert other.returncode == 2 and other.stdout == ""
    assert "out holds the report of another run (verifier pkga.kernels:verify, mode quick, seed 0, backend numpy)" \
        in other.stderr and "--force" in other.stderr
    seed = cli("verify", "pkga.kernels:verify", *FAST, "--report", "out", "--seed", "1", "-q")
    assert seed.returncode == 2  # another seed is another run
    forced = cli("verify", "pkgb.kernels:verify", *FAST, "--report", "out", "--force", "-q")
    assert forced.returncode == 0, forced.stderr
    assert json.loads((tmp_path / "out" / ".specdec-run.json").read_text())["run"]["sampler"] == "pkgb.kernels:verify"


# --------------------------------------------------------------------------- specdec-check report


def _saved(tmp_path, data, name="saved"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "report.json").write_text(json.dumps(data), encoding="utf-8")
    return folder / "report.json"


def test_report_refuses_a_hand_edited_passed(cli, tmp_path, saved_report):
    path = saved_report(passed=False)
    data = json.loads(path.read_text())
    data["passed"] = True
    path.write_text(json.dumps(data))
    proc = cli("report", path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "inconsistent report" in proc.stderr and "edited by hand" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.json"]  # nothing rendered


@pytest.mark.parametrize("verdict, status", [("passed", 0), ("inefficient", 0), ("inconclusive", 4),
                                             ("interrupted", 1)])
def test_report_exit_status_follows_the_verdict(tmp_path, saved_report, capsys, verdict, status):
    data = json.loads(saved_report(passed=True).read_text())
    data.update(verdict=verdict, passed=verdict in ("passed", "inefficient"))
    path = _saved(tmp_path, data, name=verdict)
    assert main(["report", str(path), "--no-plots"]) == status
    out = capsys.readouterr().out
    assert f"verdict: {verdict.upper()}" in out and "FAILED" not in out


def test_report_refuses_a_fifo_without_hanging(cli, tmp_path):
    os.mkfifo(tmp_path / "report.json")
    proc = cli("report", tmp_path / "report.json", timeout=60)
    assert proc.returncode == 2
    assert "is a FIFO (named pipe), not a report file" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_report_refuses_a_device_without_reading_it(cli):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    proc = cli("report", "/dev/zero", timeout=60)
    assert proc.returncode == 2 and "is a character device, not a report file" in proc.stderr


def test_report_refuses_deep_nesting_with_one_line(tmp_path, saved_report, capsys):
    path = saved_report(passed=True)
    text = path.read_text().replace('"details": {}', '"details": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}", 1)
    path.write_text(text)
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert "nested more than 32 levels deep" in err and len(err.splitlines()) == 1


def test_report_prints_control_characters_escaped(cli, tmp_path, saved_report):
    path = saved_report(passed=False)
    data = json.loads(path.read_text())
    for f in data["findings"]:
        f["scenario"] = "\x1b]52;c;SGVsbG8=\x07"
        f["message"] = "\x1b[2J cleared"
    path.write_text(json.dumps(data))
    proc = cli("report", path)
    assert proc.returncode == 1, proc.stderr
    assert not ESCAPES.search(proc.stdout), repr(ESCAPES.search(proc.stdout))
    assert "\\x1b]52;c;SGVsbG8=\\x07" in proc.stdout and "\\x1b[2J cleared" in proc.stdout
    for name in ("report.md", "report.html"):
        assert not ESCAPES.search((path.parent / name).read_text())


def test_report_rerender_keeps_the_set_whole(tmp_path, saved_report, capsys):
    path = saved_report(passed=False)
    assert main(["report", str(path), "--no-plots"]) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == [".specdec-run.json", "report.html", "report.json",
                                                             "report.md"]
    out = tmp_path / "elsewhere"
    assert main(["report", str(path), "--out", str(out), "--no-plots", "--format", "md"]) == 1
    assert sorted(p.name for p in out.iterdir()) == [".specdec-run.json", "report.json", "report.md"]
    assert (out / "report.json").read_bytes() == path.read_bytes()
    capsys.readouterr()
    other = json.loads(path.read_text())
    other["sampler"] = "someone_else:verify"
    elsewhere = _saved(tmp_path, other, name="other")
    assert main(["report", str(elsewhere), "--out", str(out), "--no-plots"]) == 2  # another run's folder
    assert "holds the report of another run" in capsys.readouterr().err
    assert main(["report", str(elsewhere), "--out", str(out), "--no-plots", "--force"]) == 1


def test_a_run_prints_hostile_scenario_names_escaped(cli, tmp_path):
    (tmp_path / "hostile_battery.py").write_text(
        "import dataclasses\n"
        "from specdec_check.scenarios import default_verifier_battery\n"
        "def verifier():\n"
        "    (s,) = [s for s in default_verifier_battery() if s.name == 'corpus-bigram']\n"
        "    return [dataclasses.replace(s, name='\\x1b]52;c;SGVsbG8=\\x07'), dataclasses.replace(s, name='\\x1b[2J')]\n")
    proc = cli("verify", "specdec_check.bugs:resample_from_target", "--mode", "quick", "--scenarios",
               "hostile_battery:verifier", "--no-progress", "--no-plots", "--report", "r")
    assert proc.returncode == 1, proc.stderr
    assert not ESCAPES.search(proc.stdout), repr(ESCAPES.search(proc.stdout))
    assert "\\x1b[2J" in proc.stdout
    for name in ("report.md", "report.html"):
        assert not ESCAPES.search((tmp_path / "r" / name).read_text())


def test_report_subprocess_smoke(tmp_path):
    """`python -m specdec_check report --help` documents the exit statuses of every verdict."""
    proc = subprocess.run([sys.executable, "-m", "specdec_check", "report", "--help"], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "4 inconclusive" in text and "1 interrupted" in text and "contradicts its findings" in text
