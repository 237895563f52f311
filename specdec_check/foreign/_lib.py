"""A chain verifier in a shared library with the C ABI (``specdec_check/include/specdec_check.h``), called with
ctypes: ``lib:./libverify.so:specdec_verify``. The checker's arrays are passed by pointer (float64 and int64, C
order: the numpy backend's own arrays, no copy); the output is written into an array the checker allocates."""

from __future__ import annotations

import ctypes
import os

import numpy as np

from ._exec import SamplerProgramError, seed_of

__all__ = ["ERROR_BYTES", "LibSampler", "lib_sampler"]

#: Room for the library's error message.
ERROR_BYTES = 4096

_I64P = ctypes.POINTER(ctypes.c_int64)
_F64P = ctypes.POINTER(ctypes.c_double)


def _pointer(array, dtype, ctype):
    array = np.ascontiguousarray(array, dtype=dtype)  # the checker's float64 / int64 arrays pass as they are
    return array, array.ctypes.data_as(ctype)


class LibSampler:
    """See the module docstring (picklable: a worker process loads the library itself)."""

    seeded_only = True  # the library draws from its own generator: the zero-coin probe cannot run

    def __init__(self, path: str, symbol: str):
        self.path, self.symbol = path, symbol
        self.__name__ = self.__qualname__ = f"lib:{path}:{symbol}"
        self._function = None

    def __getstate__(self):
        return {"path": self.path, "symbol": self.symbol}

    def __setstate__(self, state):
        self.__init__(state["path"], state["symbol"])

    def _load(self):
        try:
            library = ctypes.CDLL(os.path.abspath(self.path))
            function = getattr(library, self.symbol)
        except (OSError, AttributeError) as exc:
            raise ValueError(f"lib:{self.path}:{self.symbol}: {exc}") from None
        function.restype = ctypes.c_int
        function.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, _I64P, _F64P, _F64P, ctypes.c_uint64,
                             _I64P, ctypes.c_char_p, ctypes.c_size_t]
        self._function = function

    def __call__(self, *, draft_token_ids, draft_probs, target_probs, generator):
        if self._function is None:
            self._load()
        ids, ids_p = _pointer(draft_token_ids, np.int64, _I64P)
        draft, draft_p = _pointer(draft_probs, np.float64, _F64P)
        target, target_p = _pointer(target_probs, np.float64, _F64P)
        batch, gamma = ids.shape
        vocab = target.shape[-1]
        out = np.full((batch, gamma + 1), -1, dtype=np.int64)
        error = ctypes.create_string_buffer(ERROR_BYTES)
        status = self._function(batch, gamma, vocab, ids_p, draft_p, target_p, seed_of(generator),
                                out.ctypes.data_as(_I64P), error, ERROR_BYTES)
        if status != 0:
            raise SamplerProgramError(f"returned {status}: {error.value.decode('utf-8', 'replace') or 'no message'}")
        return out


def lib_sampler(spec: str, kind: str) -> LibSampler:
    """``FILE:SYMBOL`` (``lib:`` removed) as a sampler of ``kind`` (the C ABI has the chain verifier)."""
    if kind != "verifier":
        raise ValueError(f"the C ABI has the verifier kind only (specdec_check.h); got {kind!r}.")
    path, _, symbol = spec.rpartition(":")
    if not path or not symbol:
        raise ValueError(f"lib: needs FILE:SYMBOL, e.g. lib:./libverify.so:specdec_verify; got {spec!r}.")
    return LibSampler(path, symbol)
