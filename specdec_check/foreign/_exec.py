"""A sampler that is a program speaking the process protocol (``notes/PROTOCOL.md``) on its stdin / stdout.

:func:`exec_sampler` (``exec:COMMAND`` on the command line) starts the program on the first call in each process
(so a sampler handed to worker processes starts one program per worker), sends each call's arrays and a 64-bit
seed drawn from the call's generator, and returns the program's output. What the program does wrong becomes an
exception the checker turns into a finding: an ``error`` answer (its message), an exit or a closed output (its
status and the bytes it had sent), anything else than a message (the bytes, quoted). A version mismatch in the
handshake is a :class:`ProtocolVersionError` (a usage error on the command line).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading

import numpy as np

from ._protocol import PROTOCOL_VERSION, ProtocolError, read_message, write_message

__all__ = ["ExecSampler", "ProgramExited", "ProtocolVersionError", "SamplerProgramError", "exec_sampler",
           "kind_arrays"]

#: Bytes of the program's standard error kept (the rest is counted, not stored).
STDERR_KEPT = 64 * 1024
#: Seconds the program has to exit after ``bye`` before it is killed.
EXIT_WAIT_S = 5.0


class SamplerProgramError(RuntimeError):
    """The program answered a call with ``error``: the message is its own."""


class ProgramExited(RuntimeError):
    """The program exited (or closed its output) instead of answering."""

    breaks_the_sampler = True  # a finding wherever it happens, a probe's call included (core.guard)


class ProtocolVersionError(ValueError):
    """The program speaks another protocol version (a usage error: nothing was checked)."""


def kind_arrays(kind: str, kwargs: dict, processing=None) -> list:
    """``[(name, array)]`` a call of ``kind`` sends, in the protocol's order (``notes/PROTOCOL.md``)."""
    if kind == "verifier":
        names = ("draft_token_ids", "draft_probs", "target_probs")
    elif kind == "token_sampler":
        names = tuple(processing.keywords()[:-1])
    else:
        raise ValueError(f"the process protocol has no {kind!r} kind yet; it has verifier and token_sampler.")
    return [(name, np.asarray(kwargs[name])) for name in names]


def seed_of(generator) -> int:
    """A 64-bit seed for the program's own generator, drawn from the call's (one draw: the same generator state
    gives the same seed, fresh generators fresh seeds)."""
    return int(generator.integers(0, 2**64, dtype=np.uint64))


def _unchanged(previous, array) -> bool:
    """Whether ``array`` is the previous call's array: the same read-only memory, shape, strides and dtype (a block
    of inputs the checker hands to several calls). The previous array is kept alive, so its memory cannot have
    been reused; the checker's inputs are read-only, and the guard checks that no call wrote into them."""
    if previous is None:
        return False
    a, b = previous.__array_interface__, array.__array_interface__
    return (a["data"] == b["data"] and a["shape"] == b["shape"] and a["strides"] == b["strides"]
            and a["typestr"] == b["typestr"] and not array.flags.writeable)


class _Stderr(threading.Thread):
    """Drains the program's standard error (so it never blocks on a full pipe), keeping its first bytes."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.kept, self.total = stream, bytearray(), 0

    def run(self):
        for chunk in iter(lambda: self.stream.read1(65536), b""):
            self.total += len(chunk)
            if len(self.kept) < STDERR_KEPT:
                self.kept += chunk[: STDERR_KEPT - len(self.kept)]


class ExecSampler:
    """See the module docstring. Picklable: a worker process starts its own program."""

    #: The sampler draws from its own generator, seeded from the call's: the zero-coin probe cannot run.
    seeded_only = True

    def __init__(self, command: str, kind: str, processing=None):
        self.command, self.kind, self.processing = command, kind, processing
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("exec: needs a command, e.g. exec:'./my_kernel --serve'")
        self.__name__ = self.__qualname__ = f"exec:{command}"
        self._process, self._pid, self._calls, self.name = None, None, 0, None
        self._last = {}
        self.stderr = None
        self.bytes_sent = 0  # over the calls, for the cost of the protocol (benchmarks/foreign_speed.py)
        self._last = {}  # name -> the array the previous call sent (kept alive: its memory cannot be reused)

    def __getstate__(self):
        return {"command": self.command, "kind": self.kind, "processing": self.processing}

    def __setstate__(self, state):
        self.__init__(state["command"], state["kind"], state["processing"])

    def __repr__(self):
        return f"ExecSampler({self.command!r}, kind={self.kind!r})"

    # -- the program ---------------------------------------------------------------------------------
    def connect(self) -> None:
        """Start the program and shake hands now (else on the first call)."""
        if self._process is None or self._pid != os.getpid():
            self._start()

    def _start(self):
        try:
            self._process = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE)  # buffered: read(n) returns n bytes or EOF
        except OSError as exc:
            raise ProtocolVersionError(f"exec:{self.command}: the program could not be started: {exc}") from None
        self._pid = os.getpid()
        self._last = {}  # a new program holds no previous call
        self.stderr = _Stderr(self._process.stderr)
        self.stderr.start()
        self._out = self._process.stdout
        self._in = self._process.stdin
        try:
            self._in.write(f"SDC {PROTOCOL_VERSION} hello {self.kind}\n".encode())
            self._in.flush()
            version, verb, fields, _ = read_message(self._out)
        except (EOFError, BrokenPipeError, ProtocolError) as exc:
            self._died(exc, "during the handshake")
        if version != PROTOCOL_VERSION:
            self.close()
            raise ProtocolVersionError(f"exec:{self.command} speaks protocol version {version}; this specdec-check "
                                       f"speaks version {PROTOCOL_VERSION} (notes/PROTOCOL.md)")
        if verb == "error":
            self.close()
            raise ProtocolVersionError(f"exec:{self.command} refused the {self.kind} kind: {' '.join(fields[1:])}")
        if verb != "hello":
            raise ProtocolError(f"the program answered the handshake with {verb!r}, not 'hello'")
        self.name = fields[0] if fields else self.command

    def _died(self, exc, when: str):
        """Raise what the end of the program means: an exit (its status and stderr), or a protocol error."""
        process = self._process
        if isinstance(exc, ProtocolError):
            raise exc
        try:
            status = process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            status = None
        self._process = None
        tail = bytes(self.stderr.kept[-300:]).decode("utf-8", "replace").strip() if self.stderr else ""
        how = f"exited with status {status}" if status is not None else "closed its output"
        raise ProgramExited(f"the program {how} {when} ({exc})" + (f"; its stderr ends: {tail!r}" if tail else ""))

    def close(self):
        """Say ``bye``, close its input, and wait (kill after :data:`EXIT_WAIT_S`)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        try:
            self._in.write(f"SDC {PROTOCOL_VERSION} bye\n".encode())
            self._in.close()
            process.wait(timeout=EXIT_WAIT_S)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()

    def __del__(self):
        try:
            if self._process is not None and self._pid == os.getpid():
                self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- a call --------------------------------------------------------------------------------------
    def __call__(self, **kwargs):
        generator = kwargs.pop("generator")
        self.connect()
        self._calls += 1
        call = self._calls
        arrays = kind_arrays(self.kind, kwargs, self.processing)
        same = {name for name, a in arrays if _unchanged(self._last.get(name), a)}
        self._last = dict(arrays)
        try:
            self.bytes_sent += write_message(self._in, "call", (call, seed_of(generator), len(arrays)), arrays,
                                             same=same)
            version, verb, fields, out = read_message(self._out)
        except (EOFError, BrokenPipeError, ConnectionResetError) as exc:
            self._died(exc, f"during call {call}")
        if verb == "error":
            raise SamplerProgramError(" ".join(fields[1:]) or "no message")
        if verb != "result" or not fields or fields[0] != str(call):
            raise ProtocolError(f"call {call} was answered with {verb!r} {' '.join(fields)!r}, not 'result {call}'")
        if "output" not in out:
            raise ProtocolError(f"the answer to call {call} has no 'output' array (it has {sorted(out)})")
        return np.array(out["output"])  # a copy: writable, owned


def exec_sampler(command: str, kind: str, *, processing=None) -> ExecSampler:
    """The sampler ``exec:COMMAND`` names (see the module docstring); ``processing`` for a token sampler."""
    sampler = ExecSampler(command, kind, processing)
    if processing is not None:
        sampler.processing = processing
    return sampler
