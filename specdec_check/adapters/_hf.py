"""HuggingFace transformers ``_speculative_sampling`` -> verifier contract."""

from __future__ import annotations

import torch

from ._common import check_inputs, draw_seeds, forked_global_rng, named, pad_row

__all__ = ["from_hf_transformers"]


def _logits(probs: torch.Tensor) -> torch.Tensor:
    """log(probs) in float32 with -inf for zeros: softmax(logits) == probs / probs.sum()."""
    probs = probs.to(torch.float32)
    return torch.where(probs > 0, probs.log(), torch.full_like(probs, float("-inf")))


def from_hf_transformers(speculative_sampling, *, prefix_token: int = 0):
    """Wrap transformers' ``_speculative_sampling`` (``transformers.generation.utils``) as a verifier.

    HF's call is ``_speculative_sampling(candidate_input_ids [1, cur_len + k], candidate_logits [1, k, V],
    candidate_length=k, new_logits [1, k+1, V], is_done_candidate: bool) -> (valid_tokens [1, n+1], n_matches)``.
    It takes *logits*, handles batch size 1 only and draws from the *global* torch RNG. The adapter,
    for each batch row in turn:

    * builds ``candidate_input_ids`` = one dummy prefix token (``prefix_token``) + the drafts
      (no prefix when ``gamma == 0``, so HF's ``[:, -k:]`` slice stays right);
    * passes ``log(probs)`` as logits (``-inf`` for zeros; HF's softmax renormalises);
    * passes ``is_done_candidate=False`` (EOS/max-length truncation is not part of the law);
    * runs the call inside ``torch.random.fork_rng`` with ``torch.manual_seed(s)``, ``s`` drawn
      from our generator, so results depend only on our generator and the caller's global RNG
      state is left untouched;
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

    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        ids, q, p = check_inputs(draft_token_ids, draft_probs, target_probs, generator)
        batch, gamma = ids.shape
        device = p.device
        draft_logits, target_logits = _logits(q), _logits(p)
        prefix = torch.full((1, 1 if gamma else 0), prefix_token, dtype=torch.int64, device=device)
        rows = []
        for row, seed in enumerate(draw_seeds(generator, batch)):
            candidates = torch.cat([prefix, ids[row: row + 1]], dim=1)
            with forked_global_rng(device, seed):
                valid, _ = speculative_sampling(candidates, draft_logits[row: row + 1], gamma,
                                                target_logits[row: row + 1], False)
            rows.append(pad_row(torch.as_tensor(valid, device=device), gamma + 1))
        if not rows:
            return torch.zeros((0, gamma + 1), dtype=torch.int64, device=device)
        return torch.stack(rows)

    return named(verify, speculative_sampling, "from_hf_transformers")
