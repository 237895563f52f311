"""The torch backend of the checker: inputs on a device, in a dtype, a device generator.

``TorchBackend(device, dtype)`` implements the Backend interface of notes/CONTRACTS.md.
The checker builds each batch's rows in float64 numpy, hands them to
:meth:`TorchBackend.verifier_inputs` (cast to ``dtype``, moved to ``device``), gives the
sampler :meth:`TorchBackend.generator`, and tests the output against the exact law of
the rows *as the sampler saw them* (:meth:`TorchBackend.law_rows`: cast, back to float64,
renormalised), so a correct low-precision sampler passes.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np
import torch

from ..._torch_utils import cast_law_rows, dtype_name, resolve_device, resolve_dtype, same_device
from ...models import CastLawModel, TorchModel
from .base import Backend, fingerprint_weights
from ..chain.contract import ParsedStep

__all__ = ["TOLERANCES", "TorchBackend", "encode_on_device", "parse_on_device"]

#: Impossible-event tolerance per dtype. A sampler may compare ``u * q < p`` after each
#: probability has been rounded to the dtype (and renormalised in it), so ``p`` and ``q``
#: can swap order when they are within about two unit roundoffs ``2u`` of each other. The
#: checker flags "rejected a draft with p >= q" only when ``p >= q * (1 + tol) + tol``.
#:   float64: u = 1.1e-16 -> 1e-12 (float64 rows are validated to sum to 1 within 1e-9 and
#:            renormalised; 1e-12 leaves ~4 decades for summation error over 1e5 entries).
#:   float32: u = 6.0e-8  -> 1e-6  (~8 x 2u; measured worst ratio error of the torch reference
#:            in float32, rows of V <= 128256 renormalised: 3.2e-7).
#:   float16: u = 4.9e-4  -> 2e-3  (~2 x 2u).
#:   bfloat16: u = 3.9e-3 -> 1e-2  (~1.3 x 2u).
#: Environment variable: torch's intra-op threads during a check on the CPU (default 1; see TorchBackend.running).
THREADS_ENV = "SPECDEC_TORCH_THREADS"
TOLERANCES = {"float64": 1e-12, "float32": 1e-6, "float16": 2e-3, "bfloat16": 1e-2}


class TorchBackend(Backend):
    """Checker backend that runs samplers on ``device`` with probabilities in ``dtype``.

    ``device``: "cpu", "cuda", "cuda:1", ... (validated: ``ValueError`` when CUDA is not
    available). ``dtype``: "float32" (default), "float64", "bfloat16" or "float16".
    """

    name = "torch"
    counts_on_device = True

    def __init__(self, device="cpu", dtype="float32", *, counts_on_device=None):
        self.torch_device = resolve_device(device)
        self.torch_dtype = resolve_dtype(dtype if dtype is not None else "float32")
        self.device = str(self.torch_device)
        self.dtype = dtype_name(self.torch_dtype)
        self.tolerance = TOLERANCES[self.dtype]
        # Count where the outputs are on an accelerator (only counts cross to the host). On the CPU the
        # host is where they are: numpy reads a CPU tensor without a copy and its parser is the faster
        # one for small calls. Apple's MPS has no float64: count on the host there too.
        self.counts_on_device = (self.torch_device.type not in ("cpu", "mps") if counts_on_device is None
                                 else bool(counts_on_device))
        self._weights = {}  # (V, device) -> fingerprint weights there

    def __repr__(self):
        return f"TorchBackend(device={self.device!r}, dtype={self.dtype!r})"

    @contextlib.contextmanager
    def running(self):
        """On the CPU, one intra-op thread for the run (``SPECDEC_TORCH_THREADS`` sets another number),
        then the caller's setting again. The checker's calls are small: with more threads each op waits
        on the pool, which on a loaded 2-core machine made the default mode 3.4x slower (101 s vs 29 s)."""
        if self.torch_device.type != "cpu":
            yield
            return
        before = torch.get_num_threads()
        threads = os.environ.get(THREADS_ENV, "").strip()
        try:
            wanted = int(threads) if threads else 1
        except ValueError:
            raise ValueError(f"{THREADS_ENV} must be a positive integer; got {threads!r}.") from None
        if wanted < 1:
            raise ValueError(f"{THREADS_ENV} must be a positive integer; got {threads!r}.")
        torch.set_num_threads(wanted)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    # ----------------------------------------------------------------------------- randomness
    def generator(self, seed: int) -> torch.Generator:
        """A fresh ``torch.Generator`` on the device, seeded with ``seed`` (reduced mod 2**64)."""
        return torch.Generator(device=self.torch_device).manual_seed(int(seed) % (1 << 64))

    # ----------------------------------------------------------------------------- laws
    def law_rows(self, rows: np.ndarray) -> np.ndarray:
        """float64 law of ``rows`` as the sampler sees them: cast to dtype, back to float64, renormalised.

        Zeros stay zero (also entries that underflow in the dtype); a row with no mass stays all zeros.
        """
        return cast_law_rows(rows, self.torch_dtype)

    def law_model(self, model):
        """Numpy model with the laws the sampler sees from ``self.models(...)`` (for the generator oracles)."""
        if isinstance(model, TorchModel):
            model = model.base
        return model if self.torch_dtype == torch.float64 else CastLawModel(model, self.torch_dtype)

    # ----------------------------------------------------------------------------- inputs
    def _probs(self, x) -> torch.Tensor:
        """A draw's float64 rows as the sampler's tensor: cast on the host (less to move), then moved."""
        if self.torch_dtype == torch.float32:
            # numpy's cast rounds to nearest as torch's does (the same values, infinities past the float32 range
            # included) in half the time: 4 ms against 8.5 ms for a call of 64 rows at V = 32,000 (issue 31).
            # Always a copy (the sampler's tensor never shares the checker's rows), in numpy's memory (cast into a
            # tensor of torch's own instead, the first touch of its fresh pages made it 10 ms a call). The one
            # difference a sampler could see on the CPU: the storage cannot be resized (resize_ raises), nothing a
            # verifier does to its inputs.
            with np.errstate(over="ignore"):
                return torch.from_numpy(np.array(x, dtype=np.float32, order="C", copy=True)).to(self.torch_device)
        t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)).to(self.torch_dtype)
        return t.to(self.torch_device)

    def verifier_inputs(self, draft_token_ids, draft_probs, target_probs) -> dict:
        """Keyword arguments for a verifier (minus ``generator``): int64 ids, probs in dtype, all on the device."""
        ids = torch.from_numpy(np.ascontiguousarray(draft_token_ids, dtype=np.int64)).to(self.torch_device)
        return {
            "draft_token_ids": ids,
            "draft_probs": self._probs(draft_probs),
            "target_probs": self._probs(target_probs),
        }

    def models(self, target, draft):
        """``(target, draft)`` as device-resident :class:`TorchModel` s returning ``dtype`` rows."""
        return (TorchModel(target, device=self.torch_device, dtype=self.torch_dtype),
                TorchModel(draft, device=self.torch_device, dtype=self.torch_dtype))

    def prompts(self, prompts: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(prompts, dtype=np.int64)).to(self.torch_device)

    # ----------------------------------------------------------------------------- outputs
    def to_host(self, output) -> np.ndarray:
        """int64 numpy copy of a sampler's output (tensor on any device, or array-like)."""
        if isinstance(output, torch.Tensor):
            if output.dtype.is_floating_point or output.dtype.is_complex:
                raise TypeError(f"the sampler returned a {output.dtype} tensor; token ids must be integers.")
            return output.detach().to("cpu", torch.int64).numpy()
        arr = np.asarray(output)
        if not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
            raise TypeError(f"the sampler returned dtype {arr.dtype}; token ids must be integers.")
        return arr.astype(np.int64)

    def copy(self, value):
        """An independent copy of a tensor (``clone``) or array."""
        return value.clone() if isinstance(value, torch.Tensor) else np.array(value, copy=True)

    def fingerprint(self, value) -> bytes:
        """:meth:`Backend.fingerprint` computed where the tensor lives (only 16 bytes reach the host)."""
        if not isinstance(value, torch.Tensor):
            return super().fingerprint(value)
        value = value.detach()
        if value.device.type == "cpu" and value.dtype not in (torch.bfloat16,):
            return super().fingerprint(value.numpy())  # a view of the tensor's memory: numpy's one pass
        if value.dtype.is_floating_point and value.dim() and value.shape[-1]:
            key = (value.shape[-1], value.device)
            if key not in self._weights:
                self._weights[key] = torch.from_numpy(fingerprint_weights(value.shape[-1])).to(value.device)
            value = value.reshape(-1, value.shape[-1]).to(torch.float64) @ self._weights[key]
        return super().fingerprint(value.cpu().numpy())

    def same(self, a, b) -> bool:
        """Whether two inputs are identical (shape, values, NaN == NaN); works for bfloat16 and any device."""
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape or a.dtype != b.dtype:
                return False
            a, b = a.detach(), b.detach().to(a.device)
            if a.dtype.is_floating_point:
                return bool(((a == b) | (a.isnan() & b.isnan())).all())
            return bool(torch.equal(a, b))
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)

    # ----------------------------------------------------------------------------- device-side checking
    def on_device(self, output) -> bool:
        """Whether ``output`` can be checked where it is: an integer tensor on this backend's device."""
        return (isinstance(output, torch.Tensor) and same_device(output.device, self.torch_device)
                and not (output.dtype.is_floating_point or output.dtype.is_complex or output.dtype == torch.bool))

    def encode_on_device(self, output, vocab_size: int) -> torch.Tensor:
        """Outcome codes of well-formed outputs (:func:`encode_on_device`), on their device."""
        return encode_on_device(output, vocab_size)[0]

    def to_device(self, array: np.ndarray) -> torch.Tensor:
        """A numpy law or index array on the device (float64 laws, int64 indices)."""
        return torch.from_numpy(np.ascontiguousarray(array)).to(self.torch_device)

    def uniforms(self, seed: int):
        """``draw(n)``: float64 Uniform(0, 1) tensors on the device from a generator seeded with ``seed``."""
        gen = self.generator(seed)
        return lambda n: torch.rand(int(n), generator=gen, device=self.torch_device, dtype=torch.float64)

    def parse_on_device(self, output, draft_token_ids, vocab_size: int) -> ParsedStep | None:
        """See :func:`parse_on_device`."""
        return parse_on_device(output, draft_token_ids, vocab_size)


def encode_on_device(tokens: torch.Tensor, vocab_size: int) -> tuple:
    """Device-side :func:`specdec_check.exact.encode_emitted`: returns ``(codes int64 [B], well_formed bool [B])``.

    Rows that are not 1..gamma+1 ids in ``[0, V)`` followed by ``-1`` get code -1 and
    ``well_formed`` False (the caller decides how to report them).
    """
    tokens = tokens.long()
    batch, width = tokens.shape
    gamma = width - 1
    cols = torch.arange(width, device=tokens.device)
    lengths = (tokens >= 0).sum(dim=1)
    ok = ((tokens >= 0) == (cols < lengths[:, None])).all(dim=1)
    ok &= (lengths >= 1) & (tokens >= -1).all(dim=1) & (tokens < vocab_size).all(dim=1)
    code = torch.zeros(batch, dtype=torch.int64, device=tokens.device)
    for j in range(width):
        code = torch.where(j < lengths, code * vocab_size + tokens[:, j].clamp(min=0), code)
    sizes = [vocab_size**m for m in range(1, gamma + 2)]
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64), device=tokens.device)
    code = offsets[(lengths - 1).clamp(min=0)] + code
    return torch.where(ok, code, torch.full_like(code, -1)), ok


def parse_on_device(output: torch.Tensor, draft_token_ids: torch.Tensor, vocab_size: int | None = None):
    """Device-side :func:`~specdec_check.checker.chain.contract.check_output`: the decoded step as
    tensors (accepted count, final token or -1, emitted count) when ``output`` is well formed
    ([B, gamma+1] ids in ``[0, V)`` then -1 padding, at least one token, nothing after the first
    token that differs from its draft), else None (the host path then names the problem).
    One host synchronisation.
    """
    ids = draft_token_ids
    batch, gamma = ids.shape
    if tuple(output.shape) != (batch, gamma + 1):
        return None
    out = output.long()
    real = out >= 0
    bad = (out < -1).any() | (~real[:, 0]).any()
    if vocab_size is not None:
        bad = bad | (out >= vocab_size).any()
    if gamma:
        bad = bad | (real[:, 1:] & ~real[:, :-1]).any()
    emitted = real.sum(dim=1)
    if gamma:
        same = out[:, :gamma] == ids
        accepted = torch.where(same.all(dim=1), gamma, (~same).to(torch.uint8).argmax(dim=1))
    else:
        accepted = torch.zeros(batch, dtype=torch.int64, device=out.device)
    rows = torch.arange(batch, device=out.device)
    final = out.reshape(-1)[rows * (gamma + 1) + accepted.clamp(max=gamma)]
    final = torch.where(emitted > accepted, final, -1)
    bad = bad | (emitted > accepted + 1).any()
    if bool(bad):
        return None
    return ParsedStep(accepted, final, emitted)
