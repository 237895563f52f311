"""Writing a report set as one unit: all files of a run appear together, or none do.

The files are rendered in memory first (a renderer that fails writes nothing). Then, under
an exclusive lock on the parent folder (``flock``; waits at most :data:`LOCK_WAIT_S`):

* a folder that is absent or holds only a report set is replaced as a whole: the new set is
  written and fsynced into a hidden sibling folder, which is swapped in with one
  ``renameat2(RENAME_EXCHANGE)`` on Linux (elsewhere two renames, between which the folder
  is briefly absent but never mixed), and the old set is deleted;
* a folder that also holds other files (``--report .``, ``report ~/Downloads/report.json``)
  cannot be swapped: each file is written to a temporary file and renamed into place, all
  renames back to back after every file is on disk.

Readers thus see either the old set or the new one; of two concurrent writers the one
that commits last wins with its complete set. Only a process killed in the microseconds
between the renames of a shared folder can leave a mixed set (owned folders cannot).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

from ._folder import (
    REPORT_FILES,
    STAMP,
    ReportConflictError,
    ReportDirError,
    _check_location,
    inspect_folder,
    real_target,
)
from ._identity import RunIdentity
from ._load import read_report_bytes

__all__ = ["LOCK_WAIT_S", "commit_report_files", "stamp_bytes"]

#: Longest wait for another writer's lock: committing a set takes milliseconds, so a lock
#: held this long belongs to a hung process (or a file system that ignores flock).
LOCK_WAIT_S = 120.0

#: Errors of rename(2) that say the folder itself cannot be moved (a mount point, in use).
_UNSWAPPABLE = (errno.EBUSY, errno.EXDEV, errno.EINVAL)

_STAGING = ".specdec-new-"
_RETIRED = ".specdec-old-"


def stamp_bytes(identity: RunIdentity, names) -> bytes:
    """The run stamp: which run wrote the set, and which files belong to it."""
    body = {"specdec_check_report_set": 1, "run": identity.to_dict(), "files": sorted(names)}
    return (json.dumps(body, indent=2, sort_keys=True) + "\n").encode("utf-8")


@contextlib.contextmanager
def _locked(folder: Path, shown):
    """Hold an exclusive ``flock`` on ``folder`` (a directory descriptor); no lock where flock is missing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: renames alone
        yield False
        return
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # an unreadable parent: renames alone
        yield False
        return
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ReportDirError(f"{shown}: another process has held the lock of {folder} for "
                                         f"{LOCK_WAIT_S:.0f} s; try again") from None
                time.sleep(0.02)
            except OSError:  # a file system without flock: renames alone
                break
        yield True
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with Linux's ``renameat2(RENAME_EXCHANGE)``; ``False`` where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # glibc < 2.28, musl without it
        return False
    renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_new(folder: Path, name: str, data: bytes) -> None:
    with open(folder / name, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(folder / name, 0o644)


def _carry(old: Path, new: Path, name: str) -> None:
    """Put ``old/name`` into ``new`` (a hard link where possible, else a copy)."""
    try:
        os.link(old / name, new / name)
    except OSError:
        shutil.copy2(old / name, new / name)


def _clear_leftovers(parent: Path, target: Path) -> None:
    """Remove staging folders of writers that were killed (only ever called under the lock)."""
    prefixes = (f".{target.name}{_STAGING}", f".{target.name}{_RETIRED}")
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if name.startswith(prefixes):
            shutil.rmtree(parent / name, ignore_errors=True)


def _busy(target: Path) -> bool:
    """Whether swapping ``target`` would pull the folder from under this process (its cwd or above)."""
    try:
        cwd = Path(os.path.realpath(os.getcwd()))
    except OSError:
        return False
    return cwd == target or target in cwd.parents


def _swap_in(parent: Path, target: Path, files: dict, keep: tuple, state) -> bool:
    """Replace ``target`` by a new folder holding ``files`` (and ``keep`` carried over).

    Returns ``False``, with nothing changed, when the swap is impossible (the parent is not
    writable, the folder is a mount point): the caller then writes in place.
    """
    try:
        staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{target.name}{_STAGING}"))
    except OSError:
        return False
    try:
        for name in keep:
            if name in state.entries and name not in files:
                _carry(target, staging, name)
        for name, data in files.items():
            _write_new(staging, name, data)
        try:  # the new folder keeps the old one's permissions
            mode = stat.S_IMODE(os.stat(target).st_mode) if state.kind != "absent" else 0o755
        except OSError:
            mode = 0o755
        os.chmod(staging, mode)
        _fsync_dir(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    retired = None
    try:
        if state.kind == "absent":
            try:
                os.rename(staging, target)
                return True
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
                # The folder appeared since we looked (a writer that takes no lock): swap it.
        if _exchange(staging, target):
            retired = staging  # it holds the old set now
        else:
            prefix = f".{target.name}{_STAGING}"
            retired = parent / f".{target.name}{_RETIRED}{staging.name[len(prefix):]}"
            os.rename(target, retired)
            try:
                os.rename(staging, target)
            except OSError:
                os.rename(retired, target)  # put the old set back
                retired = None
                raise
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if exc.errno in _UNSWAPPABLE and target.is_dir():
            return False  # a mount point or a folder in use: write in place instead
        raise
    shutil.rmtree(retired, ignore_errors=True)
    return True


def _replace_in_place(target: Path, files: dict, keep: tuple, state) -> None:
    """Write ``files`` into the shared folder ``target``: temp files first, then renames back to back."""
    target.mkdir(parents=True, exist_ok=True)
    staged = []
    try:
        for name, data in files.items():
            fd, tmp = tempfile.mkstemp(dir=target, prefix=f".{name}.", suffix=".tmp")
            staged.append((tmp, name))
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, 0o644)
        for tmp, name in staged:
            os.replace(tmp, target / name)
        staged = []
    finally:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    for name in (*REPORT_FILES, STAMP):  # files of the old set this set does not replace
        if name in state.entries and name not in files and name not in keep:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target / name)
    _fsync_dir(target)


def commit_report_files(directory, files: dict, *, identity: RunIdentity | None, force: bool = False,
                        keep: tuple = (), expect: dict | None = None) -> dict:
    """Make ``files`` (``{file name: bytes}``) the report set of ``directory``; return ``{name: path}``.

    ``keep`` names files of the present set to carry over unchanged (a re-render keeps its
    ``report.json``); every other file of the old set goes. ``expect`` maps names to the
    bytes they must still hold (a re-render aborts if its ``report.json`` changed meanwhile).
    ``identity`` is the run writing the set (``None``: keep the folder's); a folder holding
    another run's report raises :class:`ReportConflictError` unless ``force``.
    """
    shown = Path(directory)
    target = real_target(directory)
    _check_location(shown, target)
    parent = target.parent
    if parent == target:
        raise ReportDirError(f"{shown}: the root of the file system cannot be a report folder")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportDirError(f"{shown}: cannot create {parent}: {exc.strerror or exc}") from None
    with _locked(parent, shown) as locked:
        state = inspect_folder(target)
        for name, want in (expect or {}).items():
            try:
                now = read_report_bytes(target / name)[1]
            except (OSError, ValueError):
                now = None
            if now != want:
                raise ReportDirError(f"{shown}: {name} changed while it was being re-rendered; run the command again")
        reason = None if force else state.conflict(identity)
        if reason is not None:
            raise ReportConflictError(f"{shown} {reason}; pass --force (force=True) to replace it, or choose "
                                      "another folder")
        stamp_identity = identity or state.identity
        if locked:
            _clear_leftovers(parent, target)
        payload = dict(files)
        if stamp_identity is not None:
            names = {*files, *(k for k in keep if k in state.entries)} - {STAMP}
            payload[STAMP] = stamp_bytes(stamp_identity, names)
        swapped = state.kind != "shared" and not _busy(target) and _swap_in(parent, target, payload, keep, state)
        if not swapped:
            # No stamp among a user's own files; but a stamp already there is kept true (or removed).
            stamped = state.kind != "shared" or STAMP in state.entries
            _replace_in_place(target, payload if stamped else files, keep, state)
        _fsync_dir(parent)
    return {name: shown / name for name in files}

