"""Sample-size plans kept on disk between runs: exact calibrations cached where they are deterministic.

A plan (:func:`~specdec_check.stats.samples_for` for a uniform law) is a pure function of ``(design TV,
support, alpha)``, of the planner's code and of numpy's and scipy's arithmetic, and costs up to 1.5 s at a token
scenario's TV 1e-3 (about 34 exact calibrations at n ~ 3e7): a run that is repeated (the usual loop: change a
kernel, check it again) plans the same triples again. They are kept in one JSON file, keyed by a digest of the
planner's source files and the specdec-check, numpy and scipy versions, so a change to any of them starts a fresh
file; a file that cannot be read is ignored and one that cannot be written is not (the plan is then computed per
process, as without the cache). Two processes writing at once can drop each other's new entry: it is planned again.

Where: ``$SPECDEC_CHECK_CACHE_DIR``, else ``$XDG_CACHE_HOME/specdec-check``, else ``~/.cache/specdec-check``;
``SPECDEC_CHECK_CACHE_DIR=off`` keeps plans in memory only.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_file", "load", "planner_key", "store"]

#: The environment variable naming the cache folder ("off": no file).
CACHE_ENV = "SPECDEC_CHECK_CACHE_DIR"
#: The planner's source files (in specdec_check/stats): a change to any of them may change a plan.
PLANNER_SOURCES = ("_power.py", "_lattice.py", "_pooling.py", "_identity.py", "_validation.py")
FILE_NAME = "plans.json"


def cache_file() -> Path | None:
    """The plans file, or None when the cache is off."""
    folder = os.environ.get(CACHE_ENV)
    if folder is not None and folder.strip().lower() in ("", "off", "0", "no", "false"):
        return None
    if folder is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(base, "specdec-check")
    return Path(folder) / FILE_NAME


@functools.lru_cache(maxsize=1)
def planner_key() -> str:
    """A digest of the planner's sources and of the numpy and scipy versions."""
    import numpy
    import scipy

    from ... import stats

    from ... import __version__

    digest = hashlib.sha256(f"specdec-check {__version__} numpy {numpy.__version__} scipy {scipy.__version__}".encode())
    folder = Path(stats.__file__).parent
    for name in PLANNER_SOURCES:
        path = folder / name
        digest.update(name.encode() + (path.read_bytes() if path.exists() else b"missing"))
    return digest.hexdigest()[:32]


def _entry(key: tuple) -> str:
    design_tv, support, alpha = key
    return f"{float(design_tv)!r} {int(support)} {float(alpha)!r}"


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("planner") != planner_key() or not isinstance(data.get("plans"), dict):
        return {}
    return {k: v for k, v in data["plans"].items() if type(v) is int and v > 0}  # not a bool


def load(key: tuple) -> int | None:
    """The plan of ``(design TV, support, alpha)`` kept on disk, or None."""
    path = cache_file()
    return None if path is None else _read(path).get(_entry(key))


def store(key: tuple, samples: int) -> None:
    """Keep a plan (the file is rewritten whole and replaced at once; a failure to write is ignored)."""
    path = cache_file()
    if path is None:
        return
    plans = _read(path)
    plans[_entry(key)] = int(samples)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".plans-", suffix=".json")
    except OSError:
        return
    try:
        with os.fdopen(handle, "w") as file:
            json.dump({"planner": planner_key(), "plans": plans}, file, sort_keys=True)
        os.chmod(temporary, 0o644)  # mkstemp makes it private: a shared cache folder stays readable
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
