"""HuggingFace transformers ``_speculative_sampling`` -> verifier contract, by keyword for every known signature."""

from __future__ import annotations

import inspect

import torch

from ._common import (AdapterSignatureError, check_inputs, draw_seeds, forked_global_rng, named, pad_row,
                      parameters_of, version_of)

__all__ = ["from_hf_transformers"]

#: The parameters every release has (``transformers/generation/utils.py``).
_COMMON = ("candidate_input_ids", "candidate_logits", "candidate_length", "new_logits")
#: The releases' extra parameters, and what a step with no EOS and no length cap passes for each.
#: 4.37 - 4.4x: ``last_assistant_token_is_eos, max_matches``; 4.4x - 4.57: ``is_done_candidate``;
#: 5.x (5.18 and later): ``assistant_ensemble_weight=None`` (opt-in lossy ensemble verification).
_KNOWN_EXTRAS = ("last_assistant_token_is_eos", "max_matches", "is_done_candidate", "assistant_ensemble_weight")


def _logits(probs: torch.Tensor) -> torch.Tensor:
    """log(probs) in float32 with -inf for zeros: softmax(logits) == probs / probs.sum()."""
    probs = probs.to(torch.float32)
    return torch.where(probs > 0, probs.log(), torch.full_like(probs, float("-inf")))


def _extras(params: dict, label: str, fn, ensemble_weight) -> dict:
    """The keyword arguments of the release's extra parameters (depending on gamma: a function of it)."""
    version = version_of(fn)
    missing = [name for name in _COMMON if name not in params]
    unknown = [name for name, p in params.items() if name not in _COMMON + _KNOWN_EXTRAS
               and p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if missing or unknown:
        raise AdapterSignatureError(
            f"{label}: {version}: _speculative_sampling{inspect.signature(fn)} is not a signature this adapter knows "
            f"(missing {missing}, unknown required {unknown}). Known: 4.37 (last_assistant_token_is_eos, "
            "max_matches), 4.4x-4.57 (is_done_candidate), 5.x (assistant_ensemble_weight).")
    if ensemble_weight is not None and "assistant_ensemble_weight" not in params:
        raise AdapterSignatureError(f"{label}: {version}: assistant_ensemble_weight was given but this release's "
                                    "_speculative_sampling has no such parameter (it came with transformers 5.18).")
    fixed = {}
    if "last_assistant_token_is_eos" in params:
        fixed["last_assistant_token_is_eos"] = False  # EOS truncation is not part of the law
    if "is_done_candidate" in params:
        fixed["is_done_candidate"] = False
    if "assistant_ensemble_weight" in params and ensemble_weight is not None:
        fixed["assistant_ensemble_weight"] = float(ensemble_weight)
    return fixed


def from_hf_transformers(speculative_sampling, *, prefix_token: int = 0, assistant_ensemble_weight=None):
    """Wrap transformers' ``_speculative_sampling`` (``transformers.generation.utils``) as a verifier.

    HF's function takes *logits*, handles batch size 1 only and draws from the *global* torch RNG;
    its extra parameters changed across releases, so the adapter reads the signature and passes
    every argument by keyword: ``last_assistant_token_is_eos=False, max_matches=k`` (4.37 - 4.4x),
    ``is_done_candidate=False`` (up to 4.57), nothing more on 5.x, where the new fifth parameter
    ``assistant_ensemble_weight`` keeps its default ``None`` (lossless) unless you pass
    ``assistant_ensemble_weight=w`` here (DIVERSE ensemble verification, lossy by design: the
    checker reports it). An unknown signature is an :class:`AdapterSignatureError` naming the
    version. For each batch row in turn the adapter:

    * builds ``candidate_input_ids`` = one dummy prefix token (``prefix_token``) + the drafts
      (no prefix when ``gamma == 0``, so HF's ``[:, -k:]`` slice stays right);
    * passes ``log(probs)`` as logits (``-inf`` for zeros; HF's softmax renormalises);
    * runs the call inside ``torch.random.fork_rng`` with the global RNG seeded from our
      generator, so results depend only on our generator and the caller's global RNG state is
      left untouched;
    * pads ``valid_tokens`` with -1 to ``gamma + 1`` columns.

    Example::

        from transformers.generation.utils import _speculative_sampling
        from specdec_check.adapters import from_hf_transformers
        from specdec_check.checker import check_verifier

        report = check_verifier(from_hf_transformers(_speculative_sampling), mode="quick", backend="torch")
        print(report.summary())
    """
    if not callable(speculative_sampling):
        raise TypeError(f"from_hf_transformers needs _speculative_sampling (a callable); got "
                        f"{type(speculative_sampling).__name__}.")
    params = parameters_of(speculative_sampling, "from_hf_transformers")
    fixed = _extras(params, "from_hf_transformers", speculative_sampling, assistant_ensemble_weight)
    takes_max_matches = "max_matches" in params

    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        ids, q, p = check_inputs(draft_token_ids, draft_probs, target_probs, generator)
        batch, gamma = ids.shape
        device = p.device
        draft_logits, target_logits = _logits(q), _logits(p)
        prefix = torch.full((1, 1 if gamma else 0), prefix_token, dtype=torch.int64, device=device)
        extras = dict(fixed, max_matches=gamma) if takes_max_matches else fixed
        rows = []
        for row, seed in enumerate(draw_seeds(generator, batch)):
            candidates = torch.cat([prefix, ids[row: row + 1]], dim=1)
            with forked_global_rng(device, seed):
                valid, _ = speculative_sampling(candidate_input_ids=candidates,
                                                candidate_logits=draft_logits[row: row + 1], candidate_length=gamma,
                                                new_logits=target_logits[row: row + 1], **extras)
            rows.append(pad_row(torch.as_tensor(valid, device=device), gamma + 1))
        if not rows:
            return torch.zeros((0, gamma + 1), dtype=torch.int64, device=device)
        return torch.stack(rows)

    return named(verify, speculative_sampling, "from_hf_transformers")
