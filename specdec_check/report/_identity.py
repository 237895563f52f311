"""Which run a report folder belongs to, and the default folder name of a run.

Two runs are *the same run* when they check the same kind of sampler, named by the same
``MODULE:CALLABLE``, in the same mode, with the same seed, on the same backend: re-running
that command replaces its own report, while a report of any other run is replaced only on
request (``--force``). Options that narrow or tune a run (``--checks``, ``--scenarios``,
``--alpha``) do not change which run it is.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["RunIdentity", "default_report_dir"]

#: ``verify`` and ``generate`` check these kinds of sampler.
KIND_OF_COMMAND = {"verify": "verifier", "generate": "generator", "ragged": "ragged_verifier", "sample": "token_sampler"}

#: Longest readable part of a default folder name; longer names are cut and keep a hash.
_NAME_LIMIT = 96


@dataclass(frozen=True)
class RunIdentity:
    """What makes two runs the same run (see the module docstring)."""

    kind: str
    sampler: str
    mode: str
    seed: int
    backend: str

    @classmethod
    def for_command(cls, command: str, sampler: str, *, mode: str, seed: int, backend: str) -> RunIdentity:
        """The identity of ``specdec-check COMMAND SAMPLER --mode --seed --backend``."""
        return cls(KIND_OF_COMMAND.get(command, command), str(sampler), str(mode), int(seed), str(backend))

    @classmethod
    def from_report(cls, data) -> RunIdentity | None:
        """The identity recorded in a report dict, or ``None`` when it lacks a field."""
        if not isinstance(data, dict):
            return None
        try:
            kind, sampler, mode, backend = (data[k] for k in ("kind", "sampler", "mode", "backend"))
            seed = data["seed"]
        except KeyError:
            return None
        if not all(isinstance(v, str) for v in (kind, sampler, mode, backend)):
            return None
        if not isinstance(seed, int) or isinstance(seed, bool):
            return None
        return cls(kind, sampler, mode, seed, backend)

    @classmethod
    def from_dict(cls, data) -> RunIdentity | None:
        """Inverse of :meth:`to_dict`; ``None`` for anything else."""
        return cls.from_report(data)

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        """One line for messages, control characters escaped and long names cut."""
        from .._escape import clip, one_line

        return (f"{self.kind} {clip(one_line(self.sampler), 200)}, mode {clip(one_line(self.mode), 40)}, "
                f"seed {self.seed}, backend {clip(one_line(self.backend), 40)}")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def default_report_dir(path: str, *, mode: str, seed: int, backend: str = "numpy", root="reports") -> Path:
    """``reports/<MODULE.CALLABLE>-<mode>-seed<seed>``: one folder per run, distinct for distinct callables.

    The whole ``MODULE:CALLABLE`` names the folder (``pkga.kernels:verify`` and
    ``pkgb.kernels:verify`` get ``pkga.kernels.verify-...`` and ``pkgb.kernels.verify-...``).
    A name that had to be changed to be a safe file name (characters other than letters,
    digits, ``_``, ``.`` and ``-``), or cut to :data:`_NAME_LIMIT` characters, ends with a
    hash of the original, so two different names never share a folder. A non-numpy backend
    is added to the name unless the name already says it.
    """
    original = str(path).strip()
    readable = original.replace(":", ".")
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", readable).strip("._-")
    changed = name != readable
    if backend != "numpy" and backend not in name:
        name = f"{name}-{backend}" if name else backend
    if changed or not name or len(name) > _NAME_LIMIT:
        name = f"{name[: _NAME_LIMIT - 12].rstrip('._-') or 'sampler'}-{_digest(original)}"
    return Path(root) / f"{name}-{mode}-seed{seed}"
