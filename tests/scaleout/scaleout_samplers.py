"""Samplers and scenario lists for the scale-out tests, importable by name on every worker.

``dies_once`` and ``always_dies`` end their own process with SIGKILL (as the OOM killer would):
only ever run them on an executor, never in the test's own process (``dies_once`` is harmless once
its marker file exists).
"""

from __future__ import annotations

import os
import signal

from specdec_check.samplers import numpy_verify
from specdec_check.scenarios import default_verifier_battery

#: Environment variable naming the marker file of :func:`dies_once` (created by the call that dies).
MARKER_ENV = "SPECDEC_SCALEOUT_MARKER"
VERIFIER_NAMES = ("corpus-bigram", "low-acceptance", "many-rows")


def verifier_scenarios():
    """Three small battery scenarios (the screen is added in front by the checker)."""
    return [s for s in default_verifier_battery() if s.name in VERIFIER_NAMES]


def dies_once(*, draft_token_ids, draft_probs, target_probs, generator):
    """The reference verifier, except that the first call anywhere (per marker file) kills its process."""
    marker = os.environ[MARKER_ENV]
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                            generator=generator)
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable: SIGKILL cannot be caught")


def always_dies(*, draft_token_ids, draft_probs, target_probs, generator):
    """Kills the process it runs in on every call."""
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable: SIGKILL cannot be caught")


def tilted_verify(*, draft_token_ids, draft_probs, target_probs, generator):
    """The reference verifier run on the target rows mixed 10% with the uniform law (fresh arrays; the inputs
    are untouched): a lossy verifier whose output law is off by a small TV (about 0.1 x TV(target, uniform)),
    which a law test needs thousands of rows to see."""
    import numpy as np

    tilted = 0.9 * np.asarray(target_probs) + 0.1 / target_probs.shape[-1]
    return numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=tilted,
                        generator=generator)


def exits_on_many_rows(*, draft_token_ids, draft_probs, target_probs, generator):
    """The reference verifier, except that it calls ``sys.exit`` on the scenario many-rows (V = 33)."""
    if target_probs.shape[-1] == 33:
        import sys

        sys.exit("a bug that only V = 33 reaches")
    return numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                        generator=generator)


def raises_a_local_base_exception(*, draft_token_ids, draft_probs, target_probs, generator):
    """Raises a BaseException of a class defined in the call (it cannot be pickled back from a worker)."""
    class Abort(BaseException):
        pass

    raise Abort("abandoned mid-run")
