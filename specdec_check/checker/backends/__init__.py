"""Backends by name: the factory behind ``backend=``, ``--backend`` and ``--specdec-backend``."""

from __future__ import annotations

from ..._settings import BACKENDS
from .base import Backend, NumpyBackend

__all__ = ["make_backend"]


def make_backend(backend: str = "numpy", *, device=None, dtype=None) -> Backend:
    """Return the backend named ``backend`` (one of :data:`specdec_check._settings.BACKENDS`) on
    ``device`` in ``dtype``; a :class:`Backend` instance passes through (device and dtype must be None)."""
    if isinstance(backend, Backend):
        if device is not None or dtype is not None:
            raise ValueError("device and dtype belong to the backend object; pass them to its constructor.")
        return backend
    if backend == "numpy":
        if device not in (None, "cpu"):
            raise ValueError(f"the numpy backend runs on the CPU; got device={device!r}. Use backend='torch' for devices.")
        if dtype not in (None, "float64"):
            raise ValueError(f"the numpy backend checks float64 samplers; got dtype={dtype!r}. Use backend='torch'.")
        return NumpyBackend()
    if backend == "torch":
        try:
            from .torch_backend import TorchBackend
        except ImportError as exc:  # torch missing
            raise ValueError(f"backend='torch' needs torch installed (pip install 'specdec-check[torch]'): {exc}") from exc
        return TorchBackend(device=device or "cpu", dtype=dtype or "float32")
    raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}.")
