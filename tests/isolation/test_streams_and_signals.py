"""Output that cannot fail a run, signals recorded instead of obeyed, and the heartbeat setting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from specdec_check._isolation import SignalGuard, TolerantStream, exit_status_for, heartbeat_period, safe_write


def test_a_tolerant_stream_goes_quiet_on_a_closed_pipe():
    read, write = os.pipe()
    os.close(read)
    raw = os.fdopen(write, "w", buffering=1)
    stream = TolerantStream(raw)
    assert stream.write("x" * 100 + "\n") == 101  # EPIPE, swallowed
    assert isinstance(stream.failed, BrokenPipeError)
    stream.write("more\n")
    stream.flush()
    raw.close()  # the descriptor now holds /dev/null: closing flushes without error


def test_a_tolerant_stream_on_a_full_device():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    raw = open("/dev/full", "w")
    stream = TolerantStream(raw)
    stream.write("text that stays in the buffer\n")
    stream.flush()  # ENOSPC, swallowed; the pending text drains into /dev/null
    assert isinstance(stream.failed, OSError) and stream.failed.errno == 28
    raw.close()


def test_safe_write_ignores_none_and_closed_streams():
    safe_write(None, "x")
    read, write = os.pipe()
    stream = os.fdopen(write, "w")
    stream.close()
    safe_write(stream, "x")  # ValueError: I/O operation on closed file, swallowed
    os.close(read)


def test_closed_descriptors_get_dev_null_and_a_failed_final_flush_cannot_change_the_status():
    code = ("import os, sys\nfrom specdec_check._isolation import tolerant_stdio\n"
            "with tolerant_stdio():\n"
            "    assert os.fstat(1) is not None\n"
            "    r, w = os.pipe()\n"
            "    assert 1 not in (r, w)\n"  # a pipe never lands on descriptor 1 (where print writes)
            "    print('x' * 100)\n"
            "sys.exit(7)\n")
    proc = subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          preexec_fn=lambda: os.close(1), text=True, timeout=60)
    assert proc.returncode == 7, proc.stderr
    read, write = os.pipe()
    os.close(read)
    code = "import sys\nfrom specdec_check._isolation import tolerant_stdio\nwith tolerant_stdio():\n    print('x')\n"
    proc = subprocess.run([sys.executable, "-c", code], stdout=write, stderr=subprocess.PIPE, text=True, timeout=60)
    os.close(write)
    assert proc.returncode == 0 and proc.stderr == ""  # without the guard: status 120 and "Exception ignored"
    read, write = os.pipe()
    os.close(read)
    raw = subprocess.run([sys.executable, "-c", "print('x')"], stdout=write, stderr=subprocess.PIPE, text=True,
                         timeout=60)
    os.close(write)
    assert raw.returncode != 0 and "BrokenPipeError" in raw.stderr  # what the guard prevents


def test_signal_guard_records_the_first_signal_and_restores_handlers():
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with SignalGuard() as guard:
        assert guard() is None
        os.kill(os.getpid(), signal.SIGTERM)  # recorded, not obeyed
        assert guard.signum == signal.SIGTERM and guard() == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGTERM)  # a second SIGTERM changes nothing
        assert guard.signum == signal.SIGTERM
        os.kill(os.getpid(), signal.SIGINT)  # a first SIGINT after it: recorded too, the first signal stays
        os.kill(os.getpid(), signal.SIGINT)  # a second: the partial report is still written (a notice says so)
        assert guard.signum == signal.SIGTERM and guard.interrupts == 2
        with pytest.raises(KeyboardInterrupt):  # a third SIGINT is the way out
            os.kill(os.getpid(), signal.SIGINT)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_exit_status_for_signals():
    assert exit_status_for(signal.SIGINT) == 130 and exit_status_for(signal.SIGTERM) == 143


@pytest.mark.parametrize("text, value", [(None, 30.0), ("", 30.0), ("0", 0.0), ("2.5", 2.5), (" 45 ", 45.0)])
def test_heartbeat_period(text, value):
    assert heartbeat_period({} if text is None else {"SPECDEC_CHECK_HEARTBEAT_S": text}) == value


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "often"])
def test_heartbeat_period_rejects(text):
    with pytest.raises(ValueError, match=f"SPECDEC_CHECK_HEARTBEAT_S must be a number of seconds >= 0 .*{text!r}"):
        heartbeat_period({"SPECDEC_CHECK_HEARTBEAT_S": text})


def test_the_heartbeat_says_what_the_run_is_doing_before_its_first_call():
    """Between the run's header and its first sampler call the run sizes its law tests (at --tv 1e-3 that is
    minutes): the heartbeat says so, not "starting the first scenario"."""
    from specdec_check._isolation._check_run import _where
    from specdec_check._isolation._supervisor import RunState

    state = RunState()
    assert _where(state) == "importing the sampler and preparing the run"
    state.absorb(("run", {"kind": "verifier"}, ["screen", "low-acceptance"]))
    assert _where(state).startswith("planning the scenarios' sample sizes")
    state.absorb(("progress", 1, 9, "corpus-bigram [shard 1/3] done"))  # a shard finished on a worker
    assert _where(state) == "1 of 9 shard(s) finished in worker processes (their sampler calls are counted there)"
    state = RunState()
    state.absorb(("run", {"kind": "verifier"}, ["screen", "low-acceptance"]))
    state.absorb(("progress", 0, 2, "screen"))
    state.calls = 3
    assert _where(state) == "scenario 'screen' (1 of 2), 3 sampler call(s) done"


def test_an_interrupted_run_on_workers_is_not_said_to_have_stopped_before_its_first_scenario():
    """A --workers run interrupted after 4 of 14 scenarios said "before the first scenario started"."""
    from specdec_check._isolation._partial import interrupt_finding

    message = interrupt_finding(signal_name="SIGINT", call=None, scenario=None, completed=4, planned=["s"] * 14)["message"]
    assert "before the first scenario" not in message and "while scenarios ran in worker processes" in message
    assert "4 of 14 scenario(s) completed" in message
    first = interrupt_finding(signal_name="SIGINT", call=None, scenario=None, completed=0, planned=["s"] * 14)["message"]
    assert "before the first scenario started" in first
