"""Report files as one unit: folders checked before a run, sets swapped in whole, runs that own their folder."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specdec_check.report import (
    ReportConflictError,
    ReportDirError,
    RunIdentity,
    default_report_dir,
    prepare_report_dir,
    write_report,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# A writer process: write_report(sample report) into FOLDER, COUNT times, alternating PASSED and FAILED
# when MODE is "alternate", else always the verdict MODE names. The sampler (hence the run) is the same.
WRITER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("sample", {sample!r})
sample = importlib.util.module_from_spec(spec); spec.loader.exec_module(sample)
from specdec_check.report import write_report
folder, mode, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
reports = {{v: sample.sample_report(passed=v, sampler="same_pkg:verify") for v in (True, False)}}
print("ready", flush=True)
for i in range(count):
    passed = (i % 2 == 0) if mode == "alternate" else mode == "passed"
    write_report(reports[passed], folder, plots=False)
"""


def _writer(folder, mode, count):
    code = WRITER.format(sample=str(HERE / "_sample.py"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder), mode, str(count)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    return proc


def _verdicts(folder):
    """(json, md, html) verdicts of one consistent view of the folder, or None if it changed under the read.

    The files are opened relative to one descriptor of the folder, so a folder swapped in
    meanwhile cannot mix into the view: what is read is what that one folder held.
    """
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
    try:
        def read(name):
            with open(name, "rb", opener=lambda path, flags: os.open(path, flags, dir_fd=fd)) as handle:
                return handle.read().decode("utf-8")

        text_json, text_md, text_html = read("report.json"), read("report.md"), read("report.html")
    except FileNotFoundError:  # the folder was retired (being deleted) while we read it
        return None
    finally:
        os.close(fd)
    return (json.loads(text_json)["verdict"].upper(), re.search(r"\*\*Verdict: (\w+)\*\*", text_md).group(1),
            re.search(r'id="verdict"[^>]*>(\w+)<', text_html).group(1))


def _assert_whole(folder):
    views = _verdicts(folder)
    assert views is not None and len(set(views)) == 1, views
    return views[0]


# --------------------------------------------------------------------------- checked before the run


def test_prepare_accepts_new_and_empty_folders_and_creates_nothing(tmp_path):
    assert prepare_report_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()
    (tmp_path / "empty").mkdir()
    assert prepare_report_dir(tmp_path / "empty") == tmp_path / "empty"
    assert list(tmp_path.iterdir()) == [tmp_path / "empty"] and not list((tmp_path / "empty").iterdir())


def test_prepare_refuses_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ReportDirError, match=r"file is a file, not a folder"):
        prepare_report_dir(tmp_path / "file")
    with pytest.raises(ReportDirError, match="is a file, not a folder"):
        write_report({"kind": "verifier"}, tmp_path / "file", formats=("json",))
    assert (tmp_path / "file").read_text() == "x"


def test_prepare_refuses_a_path_under_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ReportDirError, match=r"is under .*file, which is a file, not a folder"):
        prepare_report_dir(tmp_path / "file" / "sub" / "dir")


def test_prepare_refuses_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ReportDirError, match="is a FIFO"):
        prepare_report_dir(tmp_path / "pipe")


def _unwritable_folder(kind, tmp_path):
    if kind == "chmod":
        if os.geteuid() == 0:
            pytest.skip("running as root: permission bits do not stop root (the sysfs case covers it)")
        folder = tmp_path / "locked"
        folder.mkdir()
        folder.chmod(0o500)
        return folder
    if not os.path.isdir("/sys/kernel"):
        pytest.skip("no sysfs at /sys")
    try:
        os.mkdir("/sys/specdec-probe")
    except OSError:
        return Path("/sys")
    os.rmdir("/sys/specdec-probe")
    pytest.skip("/sys is writable here")


@pytest.mark.parametrize("kind", ["chmod", "sysfs"])
def test_prepare_refuses_an_unwritable_place(tmp_path, kind):
    folder = _unwritable_folder(kind, tmp_path)
    try:
        with pytest.raises(ReportDirError, match="cannot write into"):
            prepare_report_dir(folder / "report-dir")
        if kind == "chmod":
            with pytest.raises(ReportDirError, match="cannot write into"):
                prepare_report_dir(folder)
    finally:
        if kind == "chmod":
            folder.chmod(0o700)


# --------------------------------------------------------------------------- whose report it is


def test_another_runs_report_is_replaced_only_with_force(tmp_path, failed_report, passed_report):
    folder = tmp_path / "r"
    first = RunIdentity.for_command("verify", "pkga.kernels:verify", mode="quick", seed=0, backend="numpy")
    second = RunIdentity.for_command("verify", "pkgb.kernels:verify", mode="quick", seed=0, backend="numpy")
    write_report(failed_report, folder, run_identity=first, plots=False)
    prepare_report_dir(folder, run_identity=first)  # the same run may write again
    write_report(passed_report, folder, run_identity=first, plots=False)
    assert _assert_whole(folder) == "PASSED"
    with pytest.raises(ReportConflictError, match=r"holds the report of another run \(verifier pkga.kernels:verify"):
        prepare_report_dir(folder, run_identity=second)
    with pytest.raises(ReportConflictError, match="pass --force"):
        write_report(failed_report, folder, run_identity=second, plots=False)
    assert _assert_whole(folder) == "PASSED"  # untouched
    prepare_report_dir(folder, run_identity=second, force=True)
    write_report(failed_report, folder, run_identity=second, force=True, plots=False)
    assert _assert_whole(folder) == "FAILED"
    stamp = json.loads((folder / ".specdec-run.json").read_text())
    assert stamp["run"] == second.to_dict() and stamp["files"] == ["report.html", "report.json", "report.md"]


@pytest.mark.parametrize("field, value", [("mode", "default"), ("seed", 1), ("backend", "torch"), ("kind", "generator")])
def test_each_identity_field_makes_another_run(tmp_path, passed_report, field, value):
    base = RunIdentity.for_command("verify", "pkg:verify", mode="quick", seed=0, backend="numpy")
    write_report(passed_report, tmp_path / "r", run_identity=base, formats=("json",))
    other = RunIdentity(**{**base.to_dict(), field: value})
    with pytest.raises(ReportConflictError):
        prepare_report_dir(tmp_path / "r", run_identity=other)


def test_without_a_stamp_the_identity_comes_from_report_json(tmp_path, failed_report):
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "report.json").write_text(failed_report.to_json())  # written by an older version: no stamp
    mine = RunIdentity.from_report(failed_report.to_dict())
    prepare_report_dir(folder, run_identity=mine)
    with pytest.raises(ReportConflictError, match="another run"):
        prepare_report_dir(folder, run_identity=RunIdentity("verifier", "x:y", "quick", 0, "numpy"))


def test_report_files_of_an_unknown_run_need_force(tmp_path, passed_report):
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "report.md").write_text("# hand-written")
    with pytest.raises(ReportConflictError, match="unknown run"):
        write_report(passed_report, folder)
    write_report(passed_report, folder, force=True)
    assert (folder / "report.md").read_text().startswith("# specdec-check verifier report")


def test_files_of_the_old_set_that_are_not_rewritten_go(tmp_path, passed_report):
    folder = tmp_path / "r"
    write_report(passed_report, folder, plots=False)
    write_report(passed_report, folder, formats=("json",))
    assert sorted(p.name for p in folder.iterdir()) == [".specdec-run.json", "report.json"]


def test_a_folder_with_other_files_is_written_in_place_and_they_stay(tmp_path, failed_report, passed_report):
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    inode = folder.stat().st_ino
    write_report(passed_report, folder, plots=False)
    assert folder.stat().st_ino == inode and (folder / "notes.txt").read_text() == "mine"
    assert _assert_whole(folder) == "PASSED"
    assert not (folder / ".specdec-run.json").exists()  # no stamp among the user's files
    with pytest.raises(ReportConflictError):  # still protected, through report.json
        write_report(failed_report, folder, plots=False)
    write_report(failed_report, folder, plots=False, force=True)
    assert _assert_whole(folder) == "FAILED" and (folder / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "report.html", "report.json", "report.md"]


def test_the_current_folder_is_never_swapped_away(tmp_path, passed_report, monkeypatch):
    folder = tmp_path / "here"
    folder.mkdir()
    monkeypatch.chdir(folder)
    inode = folder.stat().st_ino
    write_report(passed_report, ".", plots=False)
    assert folder.stat().st_ino == inode and Path.cwd() == folder and _assert_whole(folder) == "PASSED"


def test_a_symlinked_folder_stays_a_symlink(tmp_path, failed_report, passed_report):
    real = tmp_path / "real"
    write_report(passed_report, real, plots=False)
    link = tmp_path / "link"
    link.symlink_to(real)
    write_report(failed_report, link, plots=False, force=True)
    assert link.is_symlink() and link.resolve() == real and _assert_whole(real) == "FAILED"


# --------------------------------------------------------------------------- default folder names


def test_default_folders_do_not_collide():
    names = ["pkga.kernels:verify", "pkgb.kernels:verify", "pkg:a.b", "pkg:a_b", "pkg:a<b", "pkg:a>b", "pkg:a b",
             "m:<evil>/../x", "m:" + "x" * 300, "m:" + "x" * 299 + "y"]
    folders = [default_report_dir(n, mode="default", seed=0) for n in names]
    assert len(set(folders)) == len(folders), folders
    assert folders[0] == Path("reports/pkga.kernels.verify-default-seed0")
    assert folders[1] == Path("reports/pkgb.kernels.verify-default-seed0")
    for folder in folders:
        assert folder.parent == Path("reports") and len(folder.name) < 130
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", folder.name), folder
    assert re.fullmatch(r"m\._evil_\.\._x-[0-9a-f]{10}-default-seed0", folders[7].name)


# --------------------------------------------------------------------------- one unit under crashes and races


def test_concurrent_writers_never_leave_a_mixed_set(tmp_path):
    """Two processes write a PASSED and a FAILED report of the same run into one folder, 60 times each.

    Meanwhile this process keeps reading the three files of one view of the folder: no view
    may mix verdicts, and at the end the folder holds one whole set (the last one committed).
    """
    folder = tmp_path / "r"
    writers = [_writer(folder, "passed", 60), _writer(folder, "failed", 60)]
    views = mixed = 0
    while any(w.poll() is None for w in writers):
        seen = _verdicts(folder)
        if seen is None:
            continue
        views += 1
        mixed += len(set(seen)) != 1
    for w in writers:
        assert w.wait() == 0, w.stderr.read()
    assert mixed == 0, f"{mixed} of {views} views mixed report.json, report.md and report.html of different runs"
    assert views >= 20, f"only {views} views were read: the test did not exercise the race"
    assert _assert_whole(folder) in ("PASSED", "FAILED")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]  # no staging folder left behind


def test_a_killed_writer_leaves_a_whole_set(tmp_path, passed_report):
    """SIGKILL at five moments while a writer alternates PASSED and FAILED sets: the folder stays whole."""
    folder = tmp_path / "r"
    for delay in (0.05, 0.15, 0.3, 0.5, 0.8):
        writer = _writer(folder, "alternate", 10_000)
        time.sleep(delay)
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        if (folder / "report.json").exists():
            _assert_whole(folder)
    write_report(passed_report, folder, plots=False, force=True)  # cleans what the killed writers left
    assert _assert_whole(folder) == "PASSED"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_a_folder_written_in_place_keeps_its_stamp_true(tmp_path, failed_report, passed_report, monkeypatch):
    """When the folder cannot be swapped (a mount point, an unwritable parent), the stamp is rewritten in place."""
    from specdec_check.report import _commit

    folder = tmp_path / "r"
    write_report(passed_report, folder, plots=False)
    monkeypatch.setattr(_commit, "_swap_in", lambda *args, **kwargs: False)
    write_report(failed_report, folder, plots=False, force=True)
    assert _assert_whole(folder) == "FAILED"
    stamp = json.loads((folder / ".specdec-run.json").read_text())
    assert stamp["run"] == RunIdentity.from_report(failed_report.to_dict()).to_dict()
    write_report(failed_report, folder, plots=False)  # the same run again: no --force needed
