"""The framing of the sampler process protocol (``notes/PROTOCOL.md``): a header line, array lines, raw
little-endian bytes."""

from __future__ import annotations

import numpy as np

__all__ = ["DTYPES", "MAGIC", "PROTOCOL_VERSION", "ProtocolError", "read_message", "write_message"]

PROTOCOL_VERSION = 1
MAGIC = b"SDC"
#: Protocol dtype names and their numpy (little-endian) dtypes.
DTYPES = {"i64": np.dtype("<i8"), "f64": np.dtype("<f8"), "f32": np.dtype("<f4")}
_NAMES = {v: k for k, v in DTYPES.items()}
#: Longest header or array line read (a program writing something else runs into it fast).
MAX_LINE = 4096
#: Bytes of a bad answer quoted in a finding.
EXCERPT = 200


class ProtocolError(RuntimeError):
    """The program broke the protocol; ``seen`` holds the first bytes it wrote that could not be read."""

    breaks_the_sampler = True  # a finding wherever it happens, a probe's call included (core.guard)

    def __init__(self, message: str, seen: bytes = b""):
        excerpt = seen[:EXCERPT]
        super().__init__(f"{message}" + (f"; it wrote {excerpt!r}" + (" ..." if len(seen) > EXCERPT else "")
                                          if seen else ""))
        self.seen = seen


def _line(stream, what: str) -> bytes:
    line = stream.readline(MAX_LINE + 1)
    if not line:
        raise EOFError(what)
    if not line.endswith(b"\n"):
        raise ProtocolError(f"{what} is not a line of at most {MAX_LINE} bytes", line)
    return line[:-1]


def _wire(array) -> np.ndarray:
    """``array`` as the protocol sends it: int64, float32 or float64, little-endian, C order."""
    a = np.asarray(array)
    dtype = DTYPES["i64"] if a.dtype.kind in "iub" else DTYPES["f32"] if a.dtype == np.float32 else DTYPES["f64"]
    return np.ascontiguousarray(a, dtype=dtype)


#: An array line that says "the array of this name in the previous call, unchanged" (no bytes follow for it).
SAME = "same"


def write_message(stream, verb: str, fields=(), arrays=(), same=()) -> int:
    """Write one message: ``SDC 1 <verb> <fields...>``, then ``arrays`` (``(name, array)`` pairs; those named in
    ``same`` as ``<name> same``: the previous call's, no bytes sent); returns the bytes written."""
    arrays = [(name, None if name in same else _wire(a)) for name, a in arrays]
    lines = [" ".join([f"{MAGIC.decode()} {PROTOCOL_VERSION} {verb}", *map(str, fields)])]
    lines += [f"{name} {SAME}" if a is None else " ".join([name, _NAMES[a.dtype], str(a.ndim), *map(str, a.shape)])
              for name, a in arrays]
    head = ("\n".join(lines) + "\n").encode("ascii")
    stream.write(head)
    size = len(head)
    for _, a in arrays:
        if a is not None:
            data = memoryview(a).cast("B")
            stream.write(data)
            size += len(data)
    stream.flush()
    return size


def read_message(stream):
    """``(version, verb, fields, {name: array})`` of the next message; ``EOFError`` at the end of the stream,
    :class:`ProtocolError` for anything else than a message."""
    header = _line(stream, "the answer's header line")
    words = header.split(b" ")
    if len(words) < 3 or words[0] != MAGIC:
        raise ProtocolError(f"the answer does not start with '{MAGIC.decode()} <version> <verb>'", header)
    try:
        version = int(words[1])
    except ValueError:
        raise ProtocolError("the answer's version is not a number", header) from None
    verb = words[2].decode("ascii", "replace")
    fields = [w.decode("utf-8", "replace") for w in words[3:]]
    arrays = {}
    if verb == "result":
        try:
            count = int(fields[1])
        except (IndexError, ValueError):
            raise ProtocolError("a result header must be 'SDC 1 result <id> <arrays>'", header) from None
        specs = []
        for _ in range(count):
            line = _line(stream, "an array line")
            parts = line.split(b" ")
            try:
                name, dtype, ndim = parts[0].decode("ascii"), DTYPES[parts[1].decode("ascii")], int(parts[2])
                shape = tuple(int(p) for p in parts[3:3 + ndim])
                if len(shape) != ndim or any(d < 0 for d in shape):
                    raise ValueError
            except (IndexError, KeyError, ValueError, UnicodeDecodeError):
                raise ProtocolError("an array line must be '<name> <i64|f64|f32> <ndim> <dims...>'", line) from None
            specs.append((name, dtype, shape))
        for name, dtype, shape in specs:
            size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            data = stream.read(size)
            if len(data) != size:
                raise EOFError(f"array {name!r}: {len(data)} of its {size} bytes")
            arrays[name] = np.frombuffer(data, dtype=dtype).reshape(shape)
    return version, verb, fields, arrays
