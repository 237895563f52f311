"""Record and replay: the planned calls of a check written to files, the kernel run anywhere, its outputs judged.

``record:DIR`` is a sampler that answers every call with the bundled reference (so the check runs its whole
plan) and writes the call: ``DIR/calls.jsonl`` (one line per call: its id, the 64-bit seed drawn from the
call's generator, the digest and ``.npy`` file of each input array) and ``DIR/calls/<id>/<name>.npy``, with the
reference's answer in ``DIR/reference/<id>.npy``. ``replay:DIR:OUTPUTS`` answers call ``k`` of a new run of the
same check with ``OUTPUTS/<id>.npy``, after checking that the run asks exactly what was recorded (seed and
inputs): the same tests, the same report and the same verdict semantics, the recorded budget standing in for
sequential stopping (a kernel that fails stops the replay where it would stop the live run, before the calls
it would not have made). ``specdec-check record`` / ``replay`` write and read ``DIR/manifest.json`` (the kind
and the options that fix the plan). Both samplers are handed the call's seed for the kernel's own generator,
so the zero-coin probe does not apply (``seeded_only``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ._exec import kind_arrays, seed_of

__all__ = ["MANIFEST", "RecordingSampler", "ReplayMismatch", "ReplaySampler", "record", "replay"]

MANIFEST = "manifest.json"
CALLS = "calls.jsonl"


class ReplayMismatch(RuntimeError):
    """The replayed run asked for a call that was not recorded (other options, or other inputs)."""


def _digest(array) -> str:
    array = np.ascontiguousarray(array)
    return hashlib.blake2b(str((array.dtype.str, array.shape)).encode() + array.tobytes(), digest_size=16).hexdigest()


def _reference(kind: str):
    from .. import samplers

    return {"verifier": samplers.numpy_verify, "token_sampler": samplers.numpy_sample}[kind]


class RecordingSampler:
    """``record:DIR`` (see the module docstring)."""

    seeded_only = True

    def __init__(self, folder, kind: str, processing=None):
        self.folder, self.kind, self.processing = Path(folder), kind, processing
        self.__name__ = self.__qualname__ = f"record:{folder}"
        self.calls = 0
        self.reference = _reference(kind)
        (self.folder / "calls").mkdir(parents=True, exist_ok=True)
        (self.folder / "reference").mkdir(parents=True, exist_ok=True)
        self._log = open(self.folder / CALLS, "w")

    def __call__(self, **kwargs):
        generator = kwargs.pop("generator")
        seed = seed_of(generator)
        self.calls += 1
        call = self.calls
        folder = self.folder / "calls" / str(call)
        folder.mkdir(exist_ok=True)
        entry = {"id": call, "seed": str(seed), "arrays": []}
        for name, array in kind_arrays(self.kind, kwargs, self.processing):
            np.save(folder / f"{name}.npy", array)
            entry["arrays"].append({"name": name, "file": f"calls/{call}/{name}.npy", "digest": _digest(array)})
        out = self.reference(**kwargs, generator=np.random.default_rng(seed))
        np.save(self.folder / "reference" / f"{call}.npy", np.asarray(out))
        self._log.write(json.dumps(entry) + "\n")
        self._log.flush()
        return out


class ReplaySampler:
    """``replay:DIR:OUTPUTS`` (see the module docstring)."""

    seeded_only = True

    def __init__(self, folder, outputs, kind: str, processing=None):
        self.folder, self.outputs, self.kind, self.processing = Path(folder), Path(outputs), kind, processing
        self.__name__ = self.__qualname__ = f"replay:{folder}:{outputs}"
        log = self.folder / CALLS
        if not log.is_file():
            raise ValueError(f"{folder} holds no recorded calls ({CALLS}); write them with specdec-check record.")
        self.recorded = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        if not self.outputs.is_dir():
            raise ValueError(f"{outputs} is not a folder of outputs (<id>.npy, one per recorded call).")
        self.calls = 0

    def __call__(self, **kwargs):
        generator = kwargs.pop("generator")
        seed = seed_of(generator)
        self.calls += 1
        if self.calls > len(self.recorded):
            raise ReplayMismatch(f"call {self.calls} was not recorded ({len(self.recorded)} were): the replay runs "
                                 "other options than the recording (see manifest.json)")
        entry = self.recorded[self.calls - 1]
        digests = [_digest(a) for _, a in kind_arrays(self.kind, kwargs, self.processing)]
        if str(seed) != entry["seed"] or digests != [a["digest"] for a in entry["arrays"]]:
            raise ReplayMismatch(f"call {self.calls} differs from the recorded call {entry['id']} (its seed or its "
                                 "inputs): the replay runs other options than the recording (see manifest.json)")
        path = self.outputs / f"{entry['id']}.npy"
        if not path.is_file():
            raise FileNotFoundError(f"no output for recorded call {entry['id']}: {path} is missing")
        return np.load(path, allow_pickle=False)


def record(folder, kind: str, processing=None) -> RecordingSampler:
    """The ``record:`` sampler writing into ``folder``."""
    return RecordingSampler(folder, kind, processing)


def replay(folder, outputs, kind: str, processing=None) -> ReplaySampler:
    """The ``replay:`` sampler answering from ``outputs``."""
    return ReplaySampler(folder, outputs, kind, processing)
