"""Samplers outside this Python process: a program speaking the process protocol (``exec:``), a shared library
with the C ABI (``lib:``), and recorded calls answered from files (record / replay). The protocol is specified
in ``notes/PROTOCOL.md``; the C signatures in ``specdec_check/include/specdec_check.h``."""

from ._exec import ExecSampler, exec_sampler
from ._lib import LibSampler, lib_sampler
from ._protocol import PROTOCOL_VERSION, ProtocolError
from ._replay import answer, record, replay

__all__ = ["PROTOCOL_VERSION", "ExecSampler", "LibSampler", "ProtocolError", "exec_sampler", "lib_sampler",
           "answer", "record", "replay", "foreign_sampler"]


def foreign_sampler(path: str, kind: str, processing=None):
    """The sampler an ``exec:COMMAND``, ``lib:FILE:SYMBOL``, ``record:DIR`` or ``replay:DIR:OUTPUTS`` path names, for
    a check of ``kind``; None for any other path (a Python ``MODULE:CALLABLE``)."""
    if path.startswith("exec:"):
        return exec_sampler(path[len("exec:"):], kind, processing=processing)
    if path.startswith("lib:"):
        return lib_sampler(path[len("lib:"):], kind)
    if path.startswith("record:"):
        return record(path[len("record:"):], kind, processing)
    if path.startswith("replay:"):
        inputs, _, outputs = path[len("replay:"):].partition(":")
        if not inputs or not outputs:
            raise ValueError(f"replay: needs INPUTS:OUTPUTS (two folders); got {path!r}.")
        return replay(inputs, outputs, kind, processing)
    return None
