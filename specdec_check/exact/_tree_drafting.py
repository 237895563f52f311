"""How a tree's children are drafted: the three schemes real systems use, one node at a time.

The verifier is exact only for the scheme its drafter uses (rules.md section 3), so the
checker drafts every tree itself with the declared scheme:

- ``"iid"``: each child drawn independently from its parent's draft row (SpecInfer's multi-step
  speculative sampling, Miao et al. 2023; Medusa-style sampling);
- ``"without_replacement"``: siblings drawn one after another without replacement, each from the
  draft row with the earlier siblings removed and renormalised (EAGLE-1; Jeon et al. 2024);
- ``"topk"``: the k most probable tokens of the draft row, in decreasing order, ties to the smaller
  token id (EAGLE-2/3 and SGLang practice; deterministic). As ``torch.topk`` does, tokens of draft
  probability zero are taken once the positive ones run out: the rule treats every child as a
  point mass, so a child's draft probability never enters it.

Siblings are the children of one parent in index order; ``removed`` marks the tokens earlier
siblings took (kept by the caller per parent slot).
"""

from __future__ import annotations

import numpy as np

from .._settings import DRAFTING_SCHEMES
from .._tables import categorical

__all__ = ["DRAFTING_SCHEMES", "check_drafting", "child_probability", "draft_child"]



def check_drafting(drafting) -> str:
    """``drafting`` if it names a scheme, else ``ValueError`` naming the schemes."""
    if drafting not in DRAFTING_SCHEMES:
        raise ValueError(f"drafting must be one of {DRAFTING_SCHEMES} (how the tree's children were drafted: "
                         f"independently, without replacement, or the deterministic top-k); got {drafting!r}.")
    return drafting


def _masked(draft_rows, removed):
    return np.where(removed, 0.0, draft_rows)


def draft_child(drafting: str, draft_rows: np.ndarray, removed: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The next sibling's token under ``drafting``, one per row of ``draft_rows`` [B, V].

    ``removed`` bool [B, V] marks the tokens earlier siblings took; it is not modified. Raises
    ``ValueError`` when drafting without replacement runs out of tokens of positive draft
    probability (or the top-k out of tokens): such a tree cannot be drafted with that scheme.
    """
    if drafting == "iid":
        return categorical(draft_rows, rng)
    if drafting == "topk":
        if removed.all(axis=1).any():
            raise ValueError(f"drafting topk needs at most V = {draft_rows.shape[1]} children per node.")
        return np.where(removed, -1.0, draft_rows).argmax(axis=1)  # the first maximum: ties to the smaller id
    left = _masked(draft_rows, removed)
    empty = ~(left > 0).any(axis=1)
    if empty.any():
        row = int(np.flatnonzero(empty)[0])
        raise ValueError(f"row {row}: drafting {drafting} needs more children than the draft row has tokens of "
                         f"positive probability ({int((draft_rows[row] > 0).sum())}); give that tree fewer children "
                         "per node or draft laws with a wider support.")
    return categorical(left / left.sum(axis=1, keepdims=True), rng)


def child_probability(drafting: str, draft_rows: np.ndarray, removed: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Probability [B] that :func:`draft_child` drafts ``tokens`` [B] (the enumerating oracles' weights)."""
    rows = np.arange(draft_rows.shape[0])
    if drafting == "iid":
        return draft_rows[rows, tokens]
    if drafting == "topk":
        return (np.where(removed, -1.0, draft_rows).argmax(axis=1) == tokens).astype(np.float64)
    left = _masked(draft_rows, removed)
    mass = left.sum(axis=1)
    return np.divide(left[rows, tokens], mass, out=np.zeros(rows.size), where=mass > 0)
