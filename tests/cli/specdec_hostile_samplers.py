"""Verifiers that end, kill, hang or outlive the process that checks them (``tests/cli/test_cli_hostile.py``).

Each is the bundled exact verifier until the second scenario of ``specdec_small_battery:verifier``
(``disjoint-supports``, the only one with V = 7), where it misbehaves on its first call: the report
can then hold the first scenario (``corpus-bigram``) as the completed part.
"""

import os
import signal
import sys
import threading
import time
from pathlib import Path

from specdec_check.samplers import numpy_verify

#: Vocabulary size of the small battery's second scenario (disjoint-supports).
SECOND_SCENARIO_VOCAB = 7


class Boom(BaseException):
    """A BaseException that is not an Exception (what no ``except Exception`` catches)."""


def _raise(exc):
    raise exc


def _deadlock():
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()  # blocks forever in C


def _busy():
    while True:
        pass


def _marker_then_sleep():
    """Tell the test (file named by HOSTILE_MARKER) that the second scenario started, then hang."""
    Path(os.environ["HOSTILE_MARKER"]).write_text("started")
    time.sleep(1e9)


def _slow_once(state={"slept": False}):  # noqa: B006 - one sleep per process
    if not state["slept"]:
        state["slept"] = True
        time.sleep(float(os.environ.get("HOSTILE_SLEEP_S", "2")))


_threads = []


def _stray_thread():
    if not _threads:
        thread = threading.Thread(target=time.sleep, args=(1e9,), daemon=False, name="stray")
        thread.start()
        _threads.append(thread)


def _misbehaving(action):
    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        if target_probs.shape[-1] == SECOND_SCENARIO_VOCAB:
            action()
        return numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                            generator=generator)

    return verify


sys_exit0 = _misbehaving(lambda: sys.exit(0))
os_exit0 = _misbehaving(lambda: os._exit(0))
sigkill_self = _misbehaving(lambda: os.kill(os.getpid(), signal.SIGKILL))
sigterm_self = _misbehaving(lambda: os.kill(os.getpid(), signal.SIGTERM))
keyboard_interrupt = _misbehaving(lambda: _raise(KeyboardInterrupt()))
custom_base_exception = _misbehaving(lambda: _raise(Boom("not an Exception")))
generator_exit = _misbehaving(lambda: _raise(GeneratorExit()))
sleep_forever = _misbehaving(lambda: time.sleep(1e9))
busy_loop = _misbehaving(_busy)
deadlock = _misbehaving(_deadlock)
hang_after_marker = _misbehaving(_marker_then_sleep)
slow_once = _misbehaving(_slow_once)
stray_thread = _misbehaving(_stray_thread)


def generate_exit0_on_second_call(*, target, draft, prompts, max_new_tokens, gamma, generator, _calls=[]):  # noqa: B006
    """A decode loop that ends its process on its second call."""
    from specdec_check.samplers import numpy_generate

    _calls.append(1)
    if len(_calls) == 2:
        os._exit(0)
    return numpy_generate(target=target, draft=draft, prompts=prompts, max_new_tokens=max_new_tokens, gamma=gamma,
                          generator=generator)


def chatty(**kwargs):
    """The reference verifier, printing a fake verdict line and writing to fd 2 from "C" on every call."""
    from specdec_check.samplers import numpy_verify

    print("verdict: PASSED")
    os.write(2, b"C-level stderr noise\n")
    return numpy_verify(**kwargs)
