"""vLLM v0 ``RejectionSampler`` (``vllm/model_executor/layers/rejection_sampler.py``) -> verifier contract.

The layouts the file went through (read from the released files; commits are the wheels' ``commit_id``):

* up to v0.5.3.post1 (38c4b7e8): ``forward(target_probs [B,k,V], bonus_token_ids, draft_probs,
  draft_token_ids, generators: List[Optional[Generator]])`` (per-request seeds, PR #6034);
  ``__init__(disable_bonus_tokens=True, strict_mode=False)``; counters from ``init_gpu_tensors(rank)``;
* v0.5.4 (4db5176d): ``seeded_seqs: Optional[Dict[int, Generator]]`` replaces the list (PR #6698);
* v0.5.5 (09c77926): the strict-mode argument order fixed (PR #7218); ``init_gpu_tensors(device)``;
* v0.6.x: ``target_with_bonus_probs [B,k+1,V]`` (PR #7244), ``disable_bonus_tokens`` removed (Sept 2024),
  ``use_flashinfer``; v0.6.5 adds ``init_tensors(device, device_type)``; v0.6.6 fixes unseeded rows in a
  batch that mixes seeded and unseeded requests (PR #10863).
"""

from __future__ import annotations

import inspect

import torch

from ..samplers._torch import sample_rows
from ._common import (AdapterSignatureError, check_inputs, check_seeding, forked_global_rng, named, parameters_of,
                      plan_seeds, version_of)

__all__ = ["from_vllm_v0"]

#: The forward parameters every known layout has (besides the target's and the seeds').
_COMMON = ("bonus_token_ids", "draft_probs", "draft_token_ids")
#: Target parameter name -> whether the target rows include the bonus row.
_TARGETS = {"target_with_bonus_probs": True, "target_probs": False}
#: Seed parameter name -> its form (a dict row -> generator, or a list with None for unseeded rows).
_SEEDS = {"seeded_seqs": "dict", "generators": "list"}


class _Layout:
    """The calling convention read off one ``forward`` signature."""

    def __init__(self, forward, label: str, owner):
        params = parameters_of(forward, label)
        params.pop("self", None)
        version = version_of(owner if owner is not None else forward)
        targets = [name for name in _TARGETS if name in params]
        missing = [name for name in _COMMON if name not in params]
        if len(targets) != 1 or missing:
            raise AdapterSignatureError(
                f"{label}: {version}: RejectionSampler.forward{inspect.signature(forward)} is not a layout this "
                f"adapter knows (it needs one of {sorted(_TARGETS)} and {list(_COMMON)}). Known: v0.5.3 "
                "(target_probs, generators list), v0.5.4-v0.5.5 (seeded_seqs dict), v0.6+ (target_with_bonus_probs).")
        self.target_name = targets[0]
        self.bonus_row = _TARGETS[self.target_name]
        seeds = [name for name in _SEEDS if name in params]
        self.seed_name = seeds[0] if seeds else None
        known = set(_COMMON) | {self.target_name} | set(seeds)
        unknown = [name for name, p in params.items() if name not in known and p.default is p.empty
                   and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if unknown:
            raise AdapterSignatureError(f"{label}: {version}: forward has required parameter(s) {unknown} this adapter "
                                        "does not know; pass them with functools.partial or report the version.")

    def describe(self) -> str:
        seeds = {"dict": "seeded_seqs dict", "list": "generators list", None: "no seeding"}
        return (f"{self.target_name} ({'with' if self.bonus_row else 'without'} the bonus row), "
                f"{seeds[_SEEDS.get(self.seed_name)]}")


def _construct(cls, strict_mode: bool):
    """``cls(...)`` as the spec-decode worker builds it: the bonus token on, ``strict_mode`` as asked."""
    params = parameters_of(cls.__init__, "from_vllm_v0")
    kwargs = {}
    if "disable_bonus_tokens" in params:  # removed in Sept 2024; True (its default) blanks the bonus column
        kwargs["disable_bonus_tokens"] = False
    if "strict_mode" in params:
        kwargs["strict_mode"] = strict_mode
    return cls(**kwargs)


def _init_counters(sampler, device: torch.device) -> None:
    """Initialise the acceptance counters as the worker would before the first ``forward``."""
    if getattr(sampler, "num_accepted_tokens", 0) is not None:
        return
    if hasattr(sampler, "init_tensors"):  # v0.6.5+: init_tensors(device, device_type)
        sampler.init_tensors(str(device), device_type=device.type)
    elif hasattr(sampler, "init_gpu_tensors") and device.type == "cuda":  # v0.5.x - v0.6.4: a CUDA rank or device
        sampler.init_gpu_tensors(device.index if device.index is not None else torch.cuda.current_device())
    else:  # what init_gpu_tensors does, on a device it does not name (the CPU)
        sampler.num_accepted_tokens = torch.tensor(0, dtype=torch.long, device=device)
        sampler.num_emitted_tokens = torch.tensor(0, dtype=torch.long, device=device)


def from_vllm_v0(sampler, *, seeding: str = "mixed", strict_mode: bool = True, probs_dtype=torch.float32):
    """Wrap vLLM v0's ``RejectionSampler`` as a verifier.

    ``sampler`` is what a user holds: the ``RejectionSampler`` class (built here as the worker builds
    it: ``strict_mode`` as given, ``disable_bonus_tokens=False`` where that parameter still exists),
    an instance, or its bound ``forward``. The layout is read from ``forward``'s signature and every
    argument is passed by keyword: target rows with or without the bonus row (``target_with_bonus_probs``
    since PR #7244, ``target_probs`` before), seeds as a ``seeded_seqs`` dict (PR #6698) or a
    ``generators`` list (before), or none. The adapter then, per call:

    * samples the bonus token *outside* the kernel, as vLLM does, from target row ``k`` (exponential
      race on our generator), and hands vLLM the target rows its version expects;
    * seeds rows by ``seeding`` (:data:`SEEDINGS`): ``"mixed"`` (default) seeds a random half of the
      rows, at least one of each kind, as production batches mix seeded and unseeded requests; the
      unseeded rows draw from the global RNG, forked and seeded from our generator;
    * initialises the acceptance counters (``init_tensors`` / ``init_gpu_tensors``) before the first call;
    * casts the probabilities to ``probs_dtype`` (float32: strict mode demands it; the bfloat16/float16
      -> float32 cast is exact, so the law is the law of the rows handed in).

    A ``forward`` whose signature matches no known layout raises :class:`AdapterSignatureError`
    naming the version (a usage error, not a verdict). An instance built with
    ``disable_bonus_tokens=True`` is refused: it never emits the bonus token.

    Example::

        from vllm.model_executor.layers.rejection_sampler import RejectionSampler
        from specdec_check.adapters import from_vllm_v0
        from specdec_check.checker import check_verifier

        report = check_verifier(from_vllm_v0(RejectionSampler), backend="torch", device="cuda")
        print(report.summary())
    """
    check_seeding(seeding)
    if isinstance(sampler, type):
        instance = _construct(sampler, strict_mode)
        call, forward = (instance if callable(instance) else instance.forward), instance.forward
    elif inspect.ismethod(sampler):
        instance, call, forward = sampler.__self__, sampler, sampler
    elif callable(getattr(sampler, "forward", None)):
        instance, call, forward = sampler, (sampler if callable(sampler) else sampler.forward), sampler.forward
    elif callable(sampler):
        instance, call, forward = None, sampler, sampler
    else:
        raise TypeError(f"from_vllm_v0 needs vLLM's RejectionSampler (class, instance or its forward); got "
                        f"{type(sampler).__name__}.")
    if instance is not None and getattr(instance, "_disable_bonus_tokens", False):
        raise ValueError("from_vllm_v0: this RejectionSampler was built with disable_bonus_tokens=True, so it never "
                         "emits the bonus token (the contract's last column); build it with "
                         "disable_bonus_tokens=False, or pass the class and let the adapter build it.")
    layout = _Layout(forward, "from_vllm_v0", instance)

    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        ids, q, p = check_inputs(draft_token_ids, draft_probs, target_probs, generator)
        batch, gamma = ids.shape
        device = p.device
        p, q = p.to(probs_dtype), q.to(probs_dtype)
        bonus = sample_rows(p[:, gamma], generator)[:, None]
        plan = plan_seeds(generator, batch, seeding)
        if instance is not None:
            _init_counters(instance, device)
        kwargs = {layout.target_name: p if layout.bonus_row else p[:, :gamma], "bonus_token_ids": bonus,
                  "draft_probs": q, "draft_token_ids": ids}
        seeded = plan.generators(device)
        if layout.seed_name == "seeded_seqs":
            kwargs["seeded_seqs"] = seeded or None
        elif layout.seed_name == "generators":
            kwargs["generators"] = [seeded.get(row) for row in range(batch)]
        with forked_global_rng(device, plan.global_seed):
            out = call(**kwargs)
        return torch.as_tensor(out).to(device=device, dtype=torch.int64)

    verify = named(verify, type(instance) if instance is not None else forward, "from_vllm_v0")
    verify.layout = layout.describe()
    verify.sampler = instance  # the RejectionSampler called (its acceptance counters included), or None
    return verify
