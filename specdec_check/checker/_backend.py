"""Where a sampler runs: the numpy backend and the factory for the torch one."""

from __future__ import annotations

import numpy as np

__all__ = ["Backend", "NumpyBackend", "make_backend"]

BACKENDS = ("numpy", "torch")


class Backend:
    """Interface between the checker (float64 numpy laws) and the sampler's array world."""

    name: str = "abstract"
    read_only_inputs = False  # True when writes into the inputs raise (no snapshot needed)
    device: str | None = None
    dtype: str = "float64"
    #: Relative/absolute slack of impossible-event checks for this dtype.
    tolerance: float = 0.0
    #: Whether :meth:`law_rows` changes rows (a cast); when False scenarios skip it.
    casts_rows: bool = True
    #: Whether outputs are parsed, transformed and counted where the sampler left them
    #: (:meth:`parse_on_device`, :meth:`to_device`, :meth:`uniforms`); only counts travel.
    counts_on_device: bool = False

    def generator(self, seed: int):
        raise NotImplementedError

    def law_rows(self, rows: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def verifier_inputs(self, draft_token_ids, draft_probs, target_probs) -> dict:
        raise NotImplementedError

    def to_host(self, output) -> np.ndarray:
        raise NotImplementedError

    def models(self, target, draft):
        raise NotImplementedError

    def prompts(self, prompts: np.ndarray):
        raise NotImplementedError

    def law_model(self, model):
        """The model whose float64 laws are those the sampler sees on this backend (after any cast)."""
        return model


class NumpyBackend(Backend):
    """float64 numpy arrays and a ``numpy.random.Generator`` (PCG64)."""

    name = "numpy"
    dtype = "float64"
    tolerance = 0.0  # the sampler sees exactly the float64 rows the laws are computed from
    casts_rows = False

    def generator(self, seed: int):
        return np.random.Generator(np.random.PCG64(seed))

    def law_rows(self, rows):
        return rows

    #: Inputs are handed over as read-only views: a write raises inside the verifier (no copy needed).
    read_only_inputs = True

    def verifier_inputs(self, draft_token_ids, draft_probs, target_probs):
        # Read-only views cost nothing, and a verifier that writes into its inputs can neither
        # corrupt the checker's laws nor hide the write: numpy raises at the write.
        views = {}
        for name, array in (("draft_token_ids", draft_token_ids), ("draft_probs", draft_probs),
                            ("target_probs", target_probs)):
            view = array.view()
            view.setflags(write=False)
            views[name] = view
        return views

    def to_host(self, output):
        return output if isinstance(output, np.ndarray) else np.asarray(output)

    def models(self, target, draft):
        return target, draft

    def prompts(self, prompts):
        return prompts


def make_backend(backend: str = "numpy", *, device=None, dtype=None) -> Backend:
    """Return the backend named ``backend`` ("numpy" or "torch") on ``device`` in ``dtype``."""
    if backend == "numpy":
        if device not in (None, "cpu"):
            raise ValueError(f"the numpy backend runs on the CPU; got device={device!r}. Use backend='torch' for devices.")
        if dtype not in (None, "float64"):
            raise ValueError(f"the numpy backend checks float64 samplers; got dtype={dtype!r}. Use backend='torch'.")
        return NumpyBackend()
    if backend == "torch":
        try:
            from ._torch_backend import TorchBackend
        except ImportError as exc:  # torch missing
            raise ValueError(f"backend='torch' needs torch installed (pip install 'specdec-check[torch]'): {exc}") from exc
        return TorchBackend(device=device or "cpu", dtype=dtype or "float32")
    raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS}.")
