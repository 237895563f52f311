"""The command line without running the checker: parsing, exit status 2, re-rendering saved reports."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specdec_check import _cli
from specdec_check._cli import default_report_dir, main, make_progress, resolve_callable, TqdmProgress


def test_help_and_version(cli, capsys):
    proc = cli("--help")  # one real subprocess; the rest in-process
    assert proc.returncode == 0
    for command in ("verify", "generate", "mutants", "demo", "report"):
        assert command in proc.stdout
    for command in ("verify", "generate", "mutants", "demo", "report"):
        assert main([command, "--help"]) == 0
        assert f"usage: specdec-check {command}" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("specdec-check ")


def test_console_script_is_installed_and_points_at_main(tmp_path):
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "specdec-check"]
    assert ep.value == "specdec_check.__main__:main" and ep.load() is main
    exe = shutil.which("specdec-check")
    if exe is None:
        pytest.skip("the specdec-check console script is not on PATH")
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("specdec-check ")


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "specdec-check: error: the following arguments are required: COMMAND"),
        (["frob"], "specdec-check: error: argument COMMAND: invalid choice: 'frob'"),
        (["verify", "--bogus"], "specdec-check verify: error: unrecognized arguments: --bogus"),
        (["verify", "--mode", "fast"], "specdec-check verify: error: argument --mode: invalid choice: 'fast'"),
        (["verify", "--seed", "-1"], "specdec-check verify: error: argument --seed: expected a non-negative integer"),
        (["verify", "--alpha", "2"], "specdec-check verify: error: argument --alpha: expected a number in (0, 1)"),
        (["verify", "--format", "pdf"], "specdec-check verify: error: argument --format: choose from json,md,html"),
        (["verify", "x.y:z"], "specdec-check verify: error: cannot import the verifier 'x.y:z': ModuleNotFoundError: "
                              "No module named 'x'"),
        (["generate", "os:no_such_attr"], "specdec-check generate: error: module 'os' has no attribute "
                                          "'no_such_attr' (the generator 'os:no_such_attr')"),
        (["verify", "os:sep"], "specdec-check verify: error: the verifier 'os:sep' is a str, not a callable"),
        (["verify", "--scenario", "no-such-scenario"], "specdec-check verify: error: unknown scenario(s) "
                                                       "'no-such-scenario'; choose from screen, corpus-bigram"),
        (["verify", "--scenarios", "os:SEEK_SET"], "specdec-check verify: error: --scenarios 'os:SEEK_SET' is neither a "
                                                   "scenario list nor a callable returning one (it gave a int)"),
        # a callable that is not a scenario factory (here the bundled sampler) is a usage error, not a crash
        (["verify", "--mode", "quick", "--scenarios", "specdec_check.samplers:numpy_verify"],
         "specdec-check verify: error: --scenarios 'specdec_check.samplers:numpy_verify': calling it with no "
         "arguments raised TypeError: numpy_verify() missing 4 required keyword-only arguments"),
        (["verify", "--scenarios", "math:floor"], "specdec-check verify: error: --scenarios 'math:floor': calling it "
                                                  "with no arguments raised TypeError"),
        (["verify", "--scenarios", "os:sep"], "specdec-check verify: error: TypeError: scenarios must be"),
        (["demo", "--tokens", "0"], "specdec-check demo: error: argument --tokens: expected a positive integer"),
        (["report", "missing/report.json"], "specdec-check report: error: cannot read report missing/report.json: "
                                            "No such file or directory"),
        (["report"], "specdec-check report: error: the following arguments are required: REPORT.json"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args, message, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(message), lines[0]


@pytest.mark.parametrize(
    "args, message",
    [
        (["verify", "x.y:z"], "specdec-check verify: error: cannot import the verifier 'x.y:z': ModuleNotFoundError: "
                              "No module named 'x'"),
        (["generate", "--bogus"], "specdec-check generate: error: unrecognized arguments: --bogus "
                                  "(see 'specdec-check generate --help')"),
    ],
)
def test_usage_errors_in_a_subprocess(cli, args, message):
    proc = cli(*args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [message] or proc.stderr.startswith(message)
    assert len(proc.stderr.splitlines()) == 1


def test_torch_backend_without_torch_is_a_usage_error(cli):
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed: the torch reference imports (see the end-to-end torch test)")
    proc = cli("verify", "--backend", "torch", "--no-report")
    assert proc.returncode == 2
    assert proc.stderr.startswith("specdec-check verify: error: cannot import the verifier 'specdec_check.samplers:torch_verify': ")
    assert "torch" in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_report_rerenders_failed_report_exit_1(cli, saved_report):
    path = saved_report(passed=False)
    proc = cli("report", path)
    assert proc.returncode == 1, proc.stderr
    assert "verdict: FAILED" in proc.stdout and "repro: python -m specdec_check verify" in proc.stdout
    assert (path.parent / "report.md").is_file() and (path.parent / "report.html").is_file()
    assert f"report: {path.parent / 'report.html'}" in proc.stdout


def test_report_rerenders_passed_report_exit_0(cli, saved_report, tmp_path):
    path = saved_report(passed=True)
    proc = cli("report", path.parent, "--format", "html", "--out", tmp_path / "elsewhere", "--no-plots")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "elsewhere" / "report.html").is_file()
    assert not (tmp_path / "elsewhere" / "report.md").exists() and not (path.parent / "report.html").exists()


def test_report_to_stdout(cli, saved_report):
    path = saved_report(passed=True)
    proc = cli("report", path, "--format", "md", "--stdout")
    assert proc.returncode == 0
    assert proc.stdout.startswith("# specdec-check verifier report:") and "## Verdict by check" in proc.stdout

def test_report_stdout_needs_one_format(saved_report, capsys):
    assert main(["report", str(saved_report(passed=True)), "--stdout"]) == 2
    assert "--stdout needs exactly one --format" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, message",
    [
        ("{ not json", "is not valid JSON"),
        ('{"report_version": 99}', "unsupported report_version 99"),
        ("[]", "a report must be a JSON object"),
    ],
)
def test_report_rejects_invalid_files(tmp_path, content, message, capsys):
    path = tmp_path / "report.json"
    path.write_text(content)
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err


def test_report_rejects_schema_violations(saved_report, capsys):
    path = saved_report()
    data = json.loads(path.read_text())
    data["results"][0]["pvalue"] = -1
    path.write_text(json.dumps(data))
    assert main(["report", str(path)]) == 2
    assert "does not match the schema at results/0/pvalue" in capsys.readouterr().err


def test_main_in_process_returns_codes(capsys):
    assert main(["--version"]) == 0
    assert main(["verify", "--nope"]) == 2
    assert capsys.readouterr().err.startswith("specdec-check verify: error: unrecognized arguments: --nope")


def test_default_report_dir():
    assert default_report_dir("specdec_check.samplers:numpy_verify", mode="default", seed=0) == Path(
        "reports/specdec_check.samplers.numpy_verify-default-seed0")
    assert default_report_dir("pkg.mod:Thing.verify", mode="quick", seed=7, backend="torch") == Path(
        "reports/pkg.mod.Thing.verify-torch-quick-seed7")
    assert default_report_dir("specdec_check.samplers:torch_verify", mode="quick", seed=1, backend="torch") == Path(
        "reports/specdec_check.samplers.torch_verify-quick-seed1")
    assert default_report_dir("m:<evil>/../x", mode="quick", seed=0).parent == Path("reports")


def test_resolve_callable_accepts_colon_and_dots():
    import os.path

    assert resolve_callable("os.path:join") is os.path.join
    assert resolve_callable("os.path.join") is os.path.join


def test_progress_adapter_drives_tqdm():
    pytest.importorskip("tqdm")
    import io

    out = io.StringIO()
    bar = TqdmProgress(file=out, disable=False, desc="verify")
    bar(0, 4, "corpus-bigram")
    bar(3, 4, "one-hot-target")
    assert bar._bar.n == 3 and bar._bar.total == 4
    bar(4, 4, "done")
    assert bar._bar.n == 4
    bar.close()
    assert bar._bar is None and "verify" in out.getvalue() and "0/4" in out.getvalue()


def test_no_progress_bar_off_terminal_or_without_tqdm(monkeypatch):
    assert make_progress(False) is None
    assert make_progress(True) is None  # pytest captures stderr: not a terminal
    monkeypatch.setitem(sys.modules, "tqdm", None)

    class Tty:
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Tty())
    assert make_progress(True) is None  # tqdm missing: no bar, no error


def test_cli_imports_stay_light():
    code = ("import sys\nfrom specdec_check._cli import main\nassert main(['--version']) == 0\n"
            "heavy = [m for m in ('torch', 'matplotlib', 'tqdm', 'jsonschema') "
            "if m in sys.modules]\nassert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_all_names_exist():
    for name in _cli.__all__:
        assert hasattr(_cli, name)


def test_the_readmes_command_line_block_is_the_parsers_synopsis():
    """The README's synopsis is generated from the parser (specdec_check._cli._parser.synopsis): every flag
    of every subcommand (--tv, --scenarios, --no-report, --workers ...) is in it, and nothing else."""
    from pathlib import Path

    from specdec_check._cli._parser import synopsis

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = readme.split("## Command line and reports\n\n```\n", 1)[1].split("```", 1)[0]
    assert block.strip() == synopsis(), "regenerate the README block with specdec_check._cli._parser.synopsis()"
    for flag in ("--tv", "--scenarios", "--no-report", "--workers", "--scheduler", "--drafting"):
        assert flag in block


def test_every_exit_status_is_named_alike_in_the_readme_and_every_help():
    """0, 1, 2, 3 and 4 (and 130 / 143) in the README's exit codes and in each check command's --help."""
    from pathlib import Path

    from specdec_check._cli._parser import build_parser

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    line = readme.split("Exit codes: ", 1)[1].split("\n\n", 1)[0]
    for status in ("0 passed", "1 failed", "2 usage error", "3 internal error", "4 inconclusive", "130 / 143"):
        assert status in " ".join(line.split()), line
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for command in ("verify", "generate", "tree", "ragged"):
        epilog = " ".join(sub.choices[command].epilog.split())
        for status in ("0 passed", "1 failed", "2 usage error", "3 internal error", "4 inconclusive"):
            assert status in epilog, (command, epilog)


def test_report_takes_formats_as_verify_does(saved_report, tmp_path, capsys):
    source = saved_report(passed=False)
    assert main(["report", str(source), "--format", "md,html", "--out", str(tmp_path / "both")]) == 1
    assert {p.name for p in (tmp_path / "both").iterdir()} >= {"report.md", "report.html"}
    assert main(["report", str(source), "--format", "json"]) == 2
    assert "choose from md,html" in capsys.readouterr().err


def test_the_progress_bar_draws_on_a_terminal_that_reports_no_size():
    """A pty of 0 x 0 (what `script` and CI give) still gets the bar: tqdm alone draws nothing there."""
    import os
    import pty
    import select

    from specdec_check._cli._progress import TqdmProgress

    master, slave = pty.openpty()
    try:
        stream = os.fdopen(slave, "w", closefd=False)
        assert os.get_terminal_size(slave).columns == 0  # the case itself
        progress = TqdmProgress(file=stream, disable=False, desc="verify")
        progress(0, 14, "screen")
        progress(3, 14, "corpus-bigram (120 calls)")
        progress(3, 14, "corpus-bigram (120 calls)")  # the same count again: an explicit redraw, whatever the clock
        stream.flush()
        chunks = []
        while select.select([master], [], [], 0.5)[0]:  # everything the pty holds (nothing: no bar at all)
            chunks.append(os.read(master, 65536))
        progress.close()
        drawn = b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(master)
        os.close(slave)
    assert "verify:" in drawn and "3/14" in drawn and "corpus-bigram (120 calls)" in drawn, drawn


def test_quiet_prints_the_verdict_line_only_even_with_heartbeats_due(tmp_path):
    import os
    import subprocess
    import sys

    from pathlib import Path

    here = str(Path(__file__).parent)  # specdec_small_battery: two small scenarios, a run of a few seconds
    env = dict(os.environ, SPECDEC_CHECK_HEARTBEAT_S="0.2",  # a heartbeat every 0.2 s, were it not quiet
               PYTHONPATH=os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-m", "specdec_check", "verify", "--mode", "quick", "--scenarios",
                           "specdec_small_battery:verifier", "--no-report", "-q"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["specdec_check.samplers:numpy_verify: PASSED"] and proc.stderr == ""
    # with a report folder too: the report is written, and -q still prints the verdict line alone
    proc = subprocess.run([sys.executable, "-m", "specdec_check", "verify", "--mode", "quick", "--scenarios",
                           "specdec_small_battery:verifier", "--report", "out", "-q"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and (tmp_path / "out" / "report.json").is_file(), proc.stderr
    assert proc.stdout.splitlines() == ["specdec_check.samplers:numpy_verify: PASSED"], proc.stdout


@pytest.mark.parametrize("flags", [("--checks", "nonsense"), ("--dtype", "float8"), ("--device", "cuda:0"),
                                   ("--backend", "numpy", "--dtype", "float16")])
def test_bad_options_are_usage_errors_before_any_heavy_import(flags):
    # Issue 29, defect 9: --checks, --dtype and --device errors came after about 15 s of imports.
    code = ("import sys\nfrom specdec_check._cli import main\n"
            f"rc = main(['verify', *{list(flags)!r}, '--no-report'])\nassert rc == 2, rc\n"
            "heavy = [m for m in ('torch', 'scipy', 'matplotlib', 'specdec_check.checker.chain.kind') "
            "if m in sys.modules]\nassert not heavy, heavy\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "specdec-check verify: error:" in proc.stderr
