"""torch helpers shared by the models, the samplers and the checker's torch backend.

Importing this module imports torch; everything that uses it is itself optional.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["DTYPES", "cast_law_rows", "dtype_name", "resolve_device", "resolve_dtype", "same_device"]

#: dtype names accepted everywhere in the torch backend.
DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
_ALIASES = {"double": "float64", "float": "float32", "fp32": "float32", "fp64": "float64", "bf16": "bfloat16",
            "half": "float16", "fp16": "float16"}


def resolve_dtype(dtype, *, default=torch.float64) -> torch.dtype:
    """Return a torch floating dtype from a name or dtype; ``ValueError`` listing the allowed names otherwise."""
    if dtype is None:
        return default
    if isinstance(dtype, torch.dtype):
        if dtype in DTYPES.values():
            return dtype
        raise ValueError(f"dtype {dtype} is not supported; use one of {sorted(DTYPES)}.")
    if isinstance(dtype, str):
        name = dtype.removeprefix("torch.")
        name = _ALIASES.get(name, name)
        if name in DTYPES:
            return DTYPES[name]
    raise ValueError(f"dtype {dtype!r} is not supported; use one of {sorted(DTYPES)}.")


def resolve_device(device) -> torch.device:
    """Return ``torch.device(device)`` after checking that it exists on this machine.

    ``ValueError`` for a malformed string, for CUDA when CUDA is not available, or for
    a CUDA index past the visible devices.
    """
    if device is None:
        device = "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ValueError(f"device {device!r} is not a valid torch device (e.g. 'cpu', 'cuda', 'cuda:1'): {exc}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device {str(device)!r}: CUDA is not available on this machine; use device='cpu' or run on a CUDA host."
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {str(device)!r}: only {torch.cuda.device_count()} CUDA device(s) are visible.")
    elif dev.type == "mps":
        if not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
            raise ValueError(f"device {str(device)!r}: MPS is not available on this machine; use device='cpu'.")
    elif dev.type != "cpu":
        raise ValueError(f"device {str(device)!r} is not supported; use 'cpu' or 'cuda[:index]'.")
    return dev


def dtype_name(dtype: torch.dtype) -> str:
    """The name of one of :data:`DTYPES` ("float32", ...)."""
    return {v: k for k, v in DTYPES.items()}[dtype]


def same_device(a: torch.device, b: torch.device) -> bool:
    """Whether two torch devices are the same device (``cuda`` means the current CUDA device)."""
    if a.type != b.type:
        return False
    if a.type == "cpu":
        return True
    ia = a.index if a.index is not None else (torch.cuda.current_device() if a.type == "cuda" else 0)
    ib = b.index if b.index is not None else (torch.cuda.current_device() if b.type == "cuda" else 0)
    return ia == ib


def cast_law_rows(rows: np.ndarray, dtype) -> np.ndarray:
    """float64 law of ``rows`` once cast to ``dtype``: cast, back to float64, renormalise each row (zeros stay zero)."""
    dtype = resolve_dtype(dtype)
    arr = np.asarray(rows, dtype=np.float64)
    if dtype == torch.float64:
        cast = arr.copy()
    else:
        cast = torch.from_numpy(np.ascontiguousarray(arr)).to(dtype).to(torch.float64).numpy()
    total = cast.sum(axis=-1, keepdims=True)
    return np.divide(cast, total, out=np.zeros_like(cast), where=total > 0)
