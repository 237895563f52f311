"""Record and replay: the planned calls of a check written to files, the kernel run anywhere, its outputs judged.

``record:DIR`` is a sampler that answers every call with the bundled reference (so the check runs its whole
plan) and writes the call: ``DIR/calls.jsonl`` (one line per call: its id, the 64-bit seed drawn from the
call's generator, the name, digest and ``.npy`` file of each input array) and the arrays, each distinct one
once (``DIR/arrays/<digest>.npy``: a block of inputs reused by several calls is stored once), with the
reference's answer in ``DIR/reference/<id>.npy``. ``replay:DIR:OUTPUTS`` answers call ``k`` of a new run of the
same check with ``OUTPUTS/<id>.npy`` (or raises the message of ``OUTPUTS/<id>.error``: the kernel refused the
call, as the reference refuses a row of NaN), after checking that the run asks exactly what was recorded (seed and
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

from ._exec import SamplerProgramError, kind_arrays, seed_of

__all__ = ["MANIFEST", "RecordingSampler", "ReplayMismatch", "ReplaySampler", "answer", "record", "replay"]

MANIFEST = "manifest.json"
CALLS = "calls.jsonl"


class ReplayMismatch(RuntimeError):
    """The replayed run asked for a call that was not recorded (other options, or other inputs)."""

    breaks_the_sampler = True


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
        (self.folder / "arrays").mkdir(parents=True, exist_ok=True)
        (self.folder / "reference").mkdir(parents=True, exist_ok=True)
        self._log = open(self.folder / CALLS, "w")

    def __call__(self, **kwargs):
        generator = kwargs.pop("generator")
        seed = seed_of(generator)
        self.calls += 1
        call = self.calls
        entry = {"id": call, "seed": str(seed), "arrays": []}
        for name, array in kind_arrays(self.kind, kwargs, self.processing):
            digest = _digest(array)
            file = self.folder / "arrays" / f"{digest}.npy"  # content-addressed: a block reused by calls is one file
            if not file.exists():
                np.save(file, array)
            entry["arrays"].append({"name": name, "file": f"arrays/{digest}.npy", "digest": digest})
        self._log.write(json.dumps(entry) + "\n")  # before the call: a call the reference refuses is recorded too
        self._log.flush()
        try:
            out = self.reference(**kwargs, generator=np.random.default_rng(seed))
        except Exception as exc:  # a NaN row, refused: the kernel's answer may be an error too (<id>.error)
            (self.folder / "reference" / f"{call}.error").write_text(f"{type(exc).__name__}: {exc}\n")
            raise
        np.save(self.folder / "reference" / f"{call}.npy", np.asarray(out))
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
        error = self.outputs / f"{entry['id']}.error"
        if error.is_file():  # the kernel refused the call: its message, as an exception raised by it
            raise SamplerProgramError(error.read_text().strip() or "no message")
        if not path.is_file():
            raise FileNotFoundError(f"no output for recorded call {entry['id']}: neither {path} nor {error} exists")
        return np.load(path, allow_pickle=False)


class _Seed:
    """Stands in for a call's generator where a recorded call is answered: hands the recorded seed to
    :func:`~specdec_check.foreign._exec.seed_of`."""

    def __init__(self, seed: int):
        self.seed = seed

    def integers(self, *args, **kwargs):
        return np.uint64(self.seed)


def answer(folder, outputs, sampler) -> int:
    """Answer every call recorded in ``folder`` with ``sampler`` (an ``exec:`` or ``lib:`` sampler, or any
    callable taking the kind's arrays and ``generator`` from which it draws one 64-bit seed), writing
    ``outputs/<id>.npy`` (or ``<id>.error`` with the message of a refused call): what a user does wherever
    the kernel runs. Returns the number of calls answered."""
    folder, outputs = Path(folder), Path(outputs)
    outputs.mkdir(parents=True, exist_ok=True)
    calls = 0
    for line in (folder / CALLS).read_text().splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        arrays = {a["name"]: np.load(folder / a["file"], allow_pickle=False) for a in entry["arrays"]}
        try:
            seed = int(entry["seed"])  # exec: / lib: samplers hand it on; a Python sampler gets a generator seeded with it
            generator = _Seed(seed) if getattr(sampler, "seeded_only", False) else np.random.default_rng(seed)
            out = sampler(**arrays, generator=generator)
        except Exception as exc:  # noqa: BLE001 - the kernel's refusal is its answer
            (outputs / f"{entry['id']}.error").write_text(f"{type(exc).__name__}: {exc}\n")
        else:
            np.save(outputs / f"{entry['id']}.npy", np.asarray(out))
        calls += 1
    return calls


def record(folder, kind: str, processing=None) -> RecordingSampler:
    """The ``record:`` sampler writing into ``folder``."""
    return RecordingSampler(folder, kind, processing)


def replay(folder, outputs, kind: str, processing=None) -> ReplaySampler:
    """The ``replay:`` sampler answering from ``outputs``."""
    return ReplaySampler(folder, outputs, kind, processing)
