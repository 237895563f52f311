"""run_isolated: one callable in a child process, for test runners (issue 14 section 2).

A sampler that ends its process inside a pytest test must fail that test, not end pytest with
status 0: each case below would, run in-process, exit or kill the pytest process itself.
"""

from __future__ import annotations

import operator
import os
import signal
import sys
import threading
import time

import pytest

from specdec_check._isolation import (
    IsolationError,
    SamplerCrashed,
    SamplerTimeout,
    choose_start_method,
    run_isolated,
)
from specdec_check.checker import check_verifier
from specdec_check.samplers import numpy_verify
from specdec_check.scenarios import default_verifier_battery

#: A liveness guard, not a speed claim: the hung samplers sleep 1e9 s, so any finite bound tells a timeout
#: from a wait; 300 s is about 30x the slowest of these runs measured on a loaded 2-core machine.
HANG_GUARD_S = 300

#: Two small scenarios of the default battery (V = 18 and V = 7), fast in quick mode.
SMALL = ("corpus-bigram", "disjoint-supports")


def _small():
    return [s for s in default_verifier_battery() if s.name in SMALL]


class Boom(BaseException):
    pass


def _raise(exc):
    raise exc


def test_returns_the_value_and_runs_in_another_process():
    assert run_isolated(operator.add, 2, 3) == 5
    assert run_isolated(lambda: os.getpid()) != os.getpid()
    assert run_isolated(lambda *, x: x * 2, x=21) == 42


def test_an_exception_is_raised_again_with_the_childs_traceback():
    def fails():
        return int("x")

    with pytest.raises(ValueError, match="invalid literal") as info:
        run_isolated(fails)
    assert "in fails" in str(info.value.__cause__) and "Traceback" in str(info.value.__cause__)


def test_an_unpicklable_exception_arrives_as_text():
    class Local(Exception):  # a local class cannot be pickled
        pass

    with pytest.raises(RuntimeError, match="Local: no pickle") as info:
        run_isolated(lambda: _raise(Local("no pickle")))
    assert "could not be sent back" in str(info.value)


@pytest.mark.parametrize(
    "ends, how",
    [
        (lambda: os._exit(0), "exited with status 0"),
        (lambda: os._exit(3), "exited with status 3"),
        (lambda: os.kill(os.getpid(), signal.SIGKILL), "was killed by signal SIGKILL (9)"),
        (lambda: os.kill(os.getpid(), signal.SIGTERM), "was killed by signal SIGTERM (15)"),
        (lambda: sys.exit(0), "raised SystemExit (0)"),
        (lambda: _raise(KeyboardInterrupt()), "raised KeyboardInterrupt"),
        (lambda: _raise(GeneratorExit()), "raised GeneratorExit"),
        (lambda: _raise(Boom("custom")), f"raised {__name__}.Boom (custom)"),
    ],
    ids=["os._exit(0)", "os._exit(3)", "SIGKILL", "SIGTERM", "sys.exit(0)", "KeyboardInterrupt", "GeneratorExit",
         "BaseException"],
)
def test_a_callable_that_ends_its_process_raises_sampler_crashed(ends, how):
    with pytest.raises(SamplerCrashed) as info:
        run_isolated(ends)
    assert info.value.how == how
    assert isinstance(info.value, IsolationError) and info.value.call is None


def test_a_hang_raises_sampler_timeout_quickly():
    started = time.monotonic()
    with pytest.raises(SamplerTimeout, match="did not finish within 0.5 s"):
        run_isolated(time.sleep, 1e9, timeout=0.5)
    assert time.monotonic() - started < HANG_GUARD_S


def test_a_stray_non_daemon_thread_does_not_delay_the_result():
    def leaves_a_thread():
        threading.Thread(target=time.sleep, args=(1e9,), daemon=False).start()
        return "done"

    started = time.monotonic()
    assert run_isolated(leaves_a_thread) == "done"
    assert time.monotonic() - started < HANG_GUARD_S


def _exit_in_second_scenario(*, draft_token_ids, draft_probs, target_probs, generator):
    if target_probs.shape[-1] == 7:
        os._exit(0)
    return numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                        generator=generator)


def _hang_in_second_scenario(*, draft_token_ids, draft_probs, target_probs, generator):
    if target_probs.shape[-1] == 7:
        time.sleep(1e9)
    return numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                        generator=generator)


def test_a_check_whose_sampler_exits_names_the_call_and_keeps_the_finished_scenarios():
    with pytest.raises(SamplerCrashed) as info:
        run_isolated(check_verifier, _exit_in_second_scenario, scenarios=_small(), mode="quick", seed=0,
                     pass_monitor=True)
    err = info.value
    assert err.how == "exited with status 0"
    assert err.call == ("disjoint-supports", 1)
    assert "during call 1 of scenario 'disjoint-supports'" in str(err)
    assert err.header["kind"] == "verifier" and err.header["mode"] == "quick"
    assert [p["summary"]["name"] for p in err.scenarios] == ["screen", "corpus-bigram"]


def test_call_timeout_names_the_hung_call():
    started = time.monotonic()
    with pytest.raises(SamplerTimeout, match="did not return within 1 s during call 1 of scenario") as info:
        run_isolated(check_verifier, _hang_in_second_scenario, scenarios=_small(), mode="quick", seed=0,
                     pass_monitor=True, call_timeout=1)
    assert info.value.call == ("disjoint-supports", 1)
    assert [p["summary"]["name"] for p in info.value.scenarios] == ["screen", "corpus-bigram"]
    assert time.monotonic() - started < HANG_GUARD_S


def _without_timings(value):
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k != "elapsed_s"}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def test_a_correct_check_returns_its_report_unchanged():
    inside = run_isolated(check_verifier, numpy_verify, scenarios=_small(), mode="quick", seed=3, pass_monitor=True)
    here = check_verifier(numpy_verify, scenarios=_small(), mode="quick", seed=3)
    assert inside.passed and _without_timings(inside.to_dict()) == _without_timings(here.to_dict())


def test_an_unpicklable_result_is_an_isolation_error_not_a_crash():
    with pytest.raises(IsolationError, match="could not be sent back") as info:
        run_isolated(lambda: (lambda: None))
    assert not isinstance(info.value, SamplerCrashed)


def test_bad_arguments():
    with pytest.raises(ValueError, match="call_timeout needs pass_monitor=True"):
        run_isolated(operator.add, 1, 2, call_timeout=1)
    with pytest.raises(ValueError, match="timeout must be None or a number of seconds >= 0"):
        run_isolated(operator.add, 1, 2, timeout=-1)
    with pytest.raises(ValueError, match="start method must be one of"):
        run_isolated(operator.add, 1, 2, start_method="forkserver")


def test_spawn_gives_the_same_answers():
    assert run_isolated(operator.add, 2, 3, start_method="spawn") == 5
    with pytest.raises(SamplerCrashed, match="exited with status 0"):
        run_isolated(os._exit, 0, start_method="spawn")


def test_start_method_is_fork_on_linux_unless_cuda_is_initialised(monkeypatch):
    monkeypatch.delenv("SPECDEC_CHECK_START_METHOD", raising=False)
    if not sys.platform.startswith("linux"):
        assert choose_start_method() == "spawn"
        return
    assert choose_start_method() == "fork"

    class Cuda:
        @staticmethod
        def is_initialized():
            return True

    class Torch:
        cuda = Cuda

    monkeypatch.setitem(sys.modules, "torch", Torch)
    assert choose_start_method() == "spawn"
    monkeypatch.setenv("SPECDEC_CHECK_START_METHOD", "fork")
    assert choose_start_method() == "fork"  # forced (e.g. to test)
    monkeypatch.setenv("SPECDEC_CHECK_START_METHOD", "thread")
    with pytest.raises(ValueError, match="got 'thread'"):
        choose_start_method()


def test_an_unkillable_child_is_not_waited_for_at_exit():
    """A child stuck in uninterruptible sleep (a GPU driver) survives SIGKILL for a while: the
    supervisor gives up after the grace period, and multiprocessing's exit hook must not join it."""
    import multiprocessing.process

    from specdec_check._isolation._process import kill_child

    class Stuck:
        pid, exitcode, killed = 2**22 + 12345, None, 0  # no such process group: killpg is skipped

        def kill(self):
            self.killed += 1

        def join(self, timeout=None):
            pass

    stuck = Stuck()
    multiprocessing.process._children.add(stuck)
    kill_child(stuck, grace_s=0.0)
    assert stuck.killed == 1 and stuck not in multiprocessing.process._children
