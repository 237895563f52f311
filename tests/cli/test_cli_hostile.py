"""Issue 14 section 2: no CLI run ends with status 0 unless the checker reached a passing verdict.

Samplers that end, kill or hang their process (``specdec_hostile_samplers``), stdout that is a
closed pipe, ``/dev/full`` or closed, SIGINT / SIGTERM mid-run, a stray non-daemon thread, and
the heartbeat on a non-terminal stderr. Every run is a real ``python -m specdec_check`` process
on the two-scenario battery in quick mode; the hostile samplers misbehave in the second scenario,
so the partial reports hold exactly the first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from specdec_check.report import load_report

HERE = Path(__file__).resolve().parent
SMALL = ("--mode", "quick", "--scenarios", "specdec_small_battery:verifier", "--no-progress")
BUG = "specdec_check.bugs:resample_from_target"
FIRST, SECOND = "corpus-bigram", "disjoint-supports"
#: The structural screen runs before a custom scenario list (its V = 1024 rows leave the samplers exact).
SCREEN = "screen"
#: Wall-clock limit of one CLI process in these tests: a quick two-scenario run takes a few
#: seconds; a run still going after this long hangs (the failure mode several tests look for).
RUN_LIMIT_S = 120


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("COLUMNS", None)
    env.pop("SPECDEC_CHECK_HEARTBEAT_S", None)
    env.update(extra)
    return env


def _cmd(*args):
    return [sys.executable, "-m", "specdec_check", *map(str, args)]


def _run(tmp_path, *args, env=None, **kwargs):
    kwargs.setdefault("capture_output", True)
    return subprocess.run(_cmd(*args), cwd=tmp_path, env=env or _env(), text=True, timeout=RUN_LIMIT_S, **kwargs)


def _report(folder):
    data = load_report(folder)  # schema-checked
    assert json.loads((Path(folder) / "report.json").read_text()) == data
    return data


def _assert_partial(data, check, scenario=SECOND):
    """A partial report: the screen and the first scenario completed, then one failure finding of ``check``."""
    assert data["passed"] is False
    assert [s["name"] for s in data["scenarios"]] == [SCREEN, FIRST]
    assert {r["scenario"] for r in data["results"]} == {SCREEN, FIRST}
    last = data["findings"][-1]
    assert last["kind"] == "failure" and last["check"] == check and last["scenario"] == scenario, last
    assert "2 of 3 scenario(s) completed" in last["message"]
    assert last["evidence"]["scenarios_completed"] == 2 and last["evidence"]["scenarios_planned"] == 3
    return last


# --------------------------------------------------------------------------- the sampler ends its process


@pytest.mark.parametrize(
    "sampler, how",
    [
        ("sys_exit0", "raised SystemExit (sys.exit(0))"),
        ("os_exit0", "exited with status 0"),
        ("sigkill_self", "was killed by signal SIGKILL (9)"),
        ("sigterm_self", "was killed by signal SIGTERM (15)"),
        # an exception says its message (or that it has none) and the user's line that raised it
        ("keyboard_interrupt", "raised KeyboardInterrupt (no message) [at {here}:"),
        ("custom_base_exception", "raised specdec_hostile_samplers.Boom: not an Exception [at {here}:"),
        ("generator_exit", "raised GeneratorExit (no message) [at {here}:"),
    ],
)
def test_a_sampler_that_ends_its_process_fails_with_a_crash_report(tmp_path, sampler, how):
    proc = _run(tmp_path, "verify", f"specdec_hostile_samplers:{sampler}", *SMALL, "--report", "out")
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    data = _report(tmp_path / "out")
    assert data["verdict"] == "failed"
    crash = _assert_partial(data, "crash")
    how = how.format(here=Path(__file__).with_name("specdec_hostile_samplers.py"))
    if "[at " in how:
        assert crash["message"].startswith(f"the sampler {how}") and "] during call " in crash["message"]
        assert crash["evidence"]["how"].startswith(how) and " in _raise: raise " in crash["evidence"]["how"]
        how = crash["evidence"]["how"]
    else:
        assert crash["message"].startswith(f"the sampler {how} during call ")
    assert crash["evidence"]["how"] == how and crash["evidence"]["scenario"] == SECOND
    assert "--scenario disjoint-supports" in crash["repro"]
    assert "verdict: FAILED" in proc.stdout and f"crash: the sampler {how}" in proc.stderr
    assert (tmp_path / "out" / "report.html").is_file() and (tmp_path / "out" / "report.md").is_file()


# --------------------------------------------------------------------------- hangs


@pytest.mark.parametrize("sampler", ["sleep_forever", "busy_loop", "deadlock"])
def test_a_hung_sampler_becomes_a_timeout_with_a_partial_report(tmp_path, sampler):
    """The sampler never returns: only the 2 s call timeout can end the run before RUN_LIMIT_S does."""
    proc = _run(tmp_path, "verify", f"specdec_hostile_samplers:{sampler}", *SMALL, "--timeout", "2",
                "--report", "out")
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    data = _report(tmp_path / "out")
    assert data["verdict"] == "failed"
    timeout = _assert_partial(data, "timeout")
    assert timeout["message"].startswith("the sampler did not return within 2 s (call ")
    assert timeout["evidence"]["timeout_s"] == 2.0 and "--timeout 2" in timeout["repro"]


def test_timeout_zero_disables_the_limit_and_bad_values_are_usage_errors(tmp_path):
    proc = _run(tmp_path, "verify", "specdec_hostile_samplers:slow_once", *SMALL, "--timeout", "0", "--no-report",
                env=_env(HOSTILE_SLEEP_S="1.5"))
    assert proc.returncode == 0, proc.stderr
    proc = _run(tmp_path, "verify", "specdec_hostile_samplers:slow_once", *SMALL, "--timeout", "0.5",
                "--no-report", env=_env(HOSTILE_SLEEP_S="1.5"))
    assert proc.returncode == 1 and "timeout: the sampler did not return within 0.5 s" in proc.stderr
    for bad in ("-1", "nan", "inf", "soon"):
        proc = _run(tmp_path, "verify", "--timeout", bad, "--no-report")
        assert proc.returncode == 2 and "argument --timeout: expected a number of seconds >= 0" in proc.stderr


def test_a_stray_non_daemon_thread_does_not_keep_the_cli_alive(tmp_path):
    """The thread sleeps forever: the run ends before RUN_LIMIT_S only if the CLI does not wait for it."""
    proc = _run(tmp_path, "verify", "specdec_hostile_samplers:stray_thread", *SMALL, "--report", "out", "-q")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].endswith(": PASSED")
    assert _report(tmp_path / "out")["passed"] is True


# --------------------------------------------------------------------------- stdout cannot decide


def _closed_pipe():
    read, write = os.pipe()
    os.close(read)
    return write


@pytest.mark.parametrize("stdout", ["closed-pipe", "dev-full", "closed-fd"])
@pytest.mark.parametrize("sampler, status, verdict", [(BUG, 1, "failed"), ("specdec_check.samplers:numpy_verify",
                                                                          0, "passed")])
def test_exit_status_does_not_depend_on_stdout(tmp_path, stdout, sampler, status, verdict):
    if stdout == "dev-full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    args = _cmd("verify", sampler, *SMALL, "--report", "out", "--no-plots")
    if stdout == "closed-pipe":  # `| head -1` after head has gone: every write fails with EPIPE
        fd = _closed_pipe()
        proc = subprocess.run(args, cwd=tmp_path, env=_env(), stdout=fd, stderr=subprocess.PIPE, text=True,
                              timeout=RUN_LIMIT_S)
        os.close(fd)
    elif stdout == "dev-full":  # every write fails with ENOSPC
        with open("/dev/full", "w") as full:
            proc = subprocess.run(args, cwd=tmp_path, env=_env(), stdout=full, stderr=subprocess.PIPE, text=True,
                                  timeout=RUN_LIMIT_S)
    else:  # `>&-`: descriptor 1 closed in the child before exec
        proc = subprocess.run(args, cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, timeout=RUN_LIMIT_S, preexec_fn=lambda: os.close(1))
    assert proc.returncode == status, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    data = _report(tmp_path / "out")
    assert data["verdict"] == verdict and [s["name"] for s in data["scenarios"]] == [SCREEN, FIRST, SECOND]


def test_head_dash_1_in_a_shell_pipeline(tmp_path):
    script = (f"{' '.join(_cmd('verify', BUG, *SMALL, '--report', 'out', '--no-plots'))} | head -1; "
              "exit ${PIPESTATUS[0]}")
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=RUN_LIMIT_S)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert len(proc.stdout.splitlines()) == 1
    assert _report(tmp_path / "out")["verdict"] == "failed"


# --------------------------------------------------------------------------- SIGINT and SIGTERM


def _interrupt_in_the_second_scenario(tmp_path, send):
    """Run verify on a sampler that hangs in the second scenario; once it is there, ``send(pid)``;
    return ``(returncode, stdout, stderr)`` (the process group is killed if it does not end in 60 s)."""
    marker = tmp_path / "second-scenario-started"
    proc = subprocess.Popen(_cmd("verify", "specdec_hostile_samplers:hang_after_marker", *SMALL, "--timeout", "0",
                                 "--report", "out"), cwd=tmp_path, env=_env(HOSTILE_MARKER=str(marker)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + RUN_LIMIT_S
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the second scenario never started"
            time.sleep(0.05)
        send(proc.pid)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out, err


def test_a_second_interrupt_within_a_second_still_leaves_the_partial_report(tmp_path):
    """An impatient Ctrl-C Ctrl-C: the second is told the partial report is being finished, and it is."""
    def twice(pid):
        os.killpg(pid, signal.SIGINT)
        time.sleep(0.1)
        os.killpg(pid, signal.SIGINT)

    status, out, err = _interrupt_in_the_second_scenario(tmp_path, twice)
    assert status == 130, (status, err)
    assert _report(tmp_path / "out")["verdict"] == "interrupted"
    assert "this report is partial" in err and "verdict: INTERRUPTED" in out


@pytest.mark.parametrize("to_group", [False, True], ids=["to-cli", "to-process-group"])
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_writes_a_partial_report_marked_interrupted(tmp_path, signum, status, to_group):
    # to the group: a terminal's Ctrl-C, or `kill -TERM -PGID`
    send = (lambda pid: os.killpg(pid, signum)) if to_group else (lambda pid: os.kill(pid, signum))
    returncode, out, err = _interrupt_in_the_second_scenario(tmp_path, send)
    assert returncode == status, (returncode, err)
    data = _report(tmp_path / "out")
    assert data["verdict"] == "interrupted"
    last = _assert_partial(data, "interrupted")
    assert last["evidence"]["signal"] == signal.Signals(signum).name
    assert f"interrupted by {signal.Signals(signum).name} during call " in last["message"]
    assert "verdict: INTERRUPTED" in out
    html = (tmp_path / "out" / "report.html").read_text()
    assert "INTERRUPTED" in html and "v-interrupted" in html


# --------------------------------------------------------------------------- heartbeat


def test_heartbeat_lines_on_a_non_terminal_stderr(tmp_path):
    period = 0.3
    proc = subprocess.Popen(_cmd("verify", "specdec_hostile_samplers:slow_once", *SMALL, "--no-report"),
                            cwd=tmp_path, env=_env(HOSTILE_SLEEP_S="3", SPECDEC_CHECK_HEARTBEAT_S=str(period)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []

    def read():
        for line in proc.stderr:
            lines.append((time.monotonic(), line.rstrip("\n")))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    out = proc.stdout.read()
    proc.wait(timeout=RUN_LIMIT_S)
    reader.join(10)
    assert proc.returncode == 0, lines
    beats = [(t, text) for t, text in lines if text.startswith("specdec-check verify: still running after ")]
    assert len(beats) >= 6, lines  # at least 3 s of sleeping at one line every 0.3 s
    # No wall-clock bound on when each line arrived (a loaded machine delays lines): the count over the
    # sampler's 3 s sleep says the schedule ran, and the lines say where the run was.
    during = [text for _, text in beats if "disjoint-supports" in text]
    assert during and "(3 of 3)" in during[-1] and "sampler call(s) done" in during[-1]  # the screen, then two
    assert any("; call 1 has run for " in text for text in during)  # the 3 s call in progress is named
    assert "verdict: PASSED" in out


def test_bad_heartbeat_setting_is_a_usage_error(tmp_path):
    proc = _run(tmp_path, "verify", *SMALL, "--no-report", env=_env(SPECDEC_CHECK_HEARTBEAT_S="often"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("specdec-check verify: error: SPECDEC_CHECK_HEARTBEAT_S must be a number of "
                                   "seconds >= 0 (0 turns the heartbeat off); got 'often'")


# --------------------------------------------------------------------------- spawn, where fork is unsafe


def test_spawned_child_gives_the_same_verdicts(tmp_path):
    env = _env(SPECDEC_CHECK_START_METHOD="spawn")
    proc = _run(tmp_path, "verify", "specdec_hostile_samplers:os_exit0", *SMALL, "--report", "out", env=env)
    assert proc.returncode == 1, proc.stderr
    assert _assert_partial(_report(tmp_path / "out"), "crash")["evidence"]["how"] == "exited with status 0"
    proc = _run(tmp_path, "verify", *SMALL, "--no-report", "-q", env=env)
    assert proc.returncode == 0 and proc.stdout.strip().endswith(": PASSED"), proc.stderr


def test_on_a_terminal_the_bar_names_the_call_in_progress_and_no_heartbeat_lines(tmp_path):
    pty = pytest.importorskip("pty")
    import fcntl
    import re
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # a real terminal's size
    proc = subprocess.Popen(_cmd("verify", "specdec_hostile_samplers:slow_once", *SMALL[:-1], "--no-report"),
                            cwd=tmp_path, env=_env(HOSTILE_SLEEP_S="2.5", SPECDEC_CHECK_HEARTBEAT_S="0.3"),
                            stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=RUN_LIMIT_S) == 0, out
    labels = set(re.findall(rb"disjoint-supports \([0-9,]+ calls\); call 1 running for [0-9]+s", out))
    assert labels, out[-2000:]
    assert b"still running" not in out  # the bar is the progress on a terminal
    assert out.rstrip().endswith(b": PASSED")


def test_a_decode_loop_that_exits_fails_generate(tmp_path):
    proc = _run(tmp_path, "generate", "specdec_hostile_samplers:generate_exit0_on_second_call", "--mode", "quick",
                "--scenarios", "specdec_small_battery:generator", "--no-progress", "--report", "out")
    assert proc.returncode == 1, proc.stderr
    data = _report(tmp_path / "out")
    assert data["kind"] == "generator" and data["verdict"] == "failed" and data["scenarios"] == []
    crash = data["findings"][-1]
    assert crash["check"] == "crash" and crash["evidence"]["how"] == "exited with status 0"
    assert crash["message"].startswith("the sampler exited with status 0 during call 2 of scenario ")
    assert "0 of 1 scenario(s) completed" in crash["message"]


@pytest.mark.parametrize("body, how", [("import os\nos._exit(0)\n", "exited with status 0"),
                                       ("import sys\nsys.exit(0)\n", "raised SystemExit (sys.exit(0))")])
def test_a_module_that_exits_on_import_fails_with_a_report(tmp_path, body, how):
    (tmp_path / "exits_on_import.py").write_text(body)
    proc = _run(tmp_path, "verify", "exits_on_import:verify", *SMALL, "--report", "out")
    assert proc.returncode == 1, proc.stderr
    data = _report(tmp_path / "out")  # the header comes from the command line: nothing was planned
    assert data["sampler"] == "exits_on_import:verify" and data["mode"] == "quick" and data["scenarios"] == []
    crash = data["findings"][-1]
    assert crash["check"] == "crash" and crash["evidence"]["how"] == how
    assert "before the first scenario started" in crash["message"]


def test_the_samplers_own_output_stays_out_of_the_verdict_and_goes_in_the_report(tmp_path):
    """A sampler printing a fake ``verdict: PASSED`` on every call (and writing to fd 2 below Python) does
    not reach the terminal; the report keeps its size and a bounded excerpt."""
    proc = _run(tmp_path, "verify", "specdec_hostile_samplers:chatty", *SMALL, "--report", "out")
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert proc.stdout.count("verdict: PASSED") == 1 and "C-level stderr noise" not in proc.stderr
    assert "bytes to stdout/stderr, kept out of this output" in proc.stdout
    captured = _report(tmp_path / "out")["sampler_output"]
    assert captured["bytes"] > 0 and "verdict: PASSED\nC-level stderr noise" in captured["excerpt"]
    assert len(captured["excerpt"]) <= 4100 and captured["truncated"] == (captured["bytes"] > 4000)
    assert "## The sampler's own output" in (tmp_path / "out" / "report.md").read_text()
