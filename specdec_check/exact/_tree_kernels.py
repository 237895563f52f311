"""Unvalidated kernels of the exact per-row laws of tree verification, shared by the oracles and the checker.

A tree of ``N`` drafted nodes is given by ``parents`` int [B, N] (``-1``: a child of the root,
else an earlier node). Rows of probabilities are indexed by *slots*: slot 0 is the root (the
current context), slot ``i + 1`` is node ``i``; ``draft_probs[:, s]`` and ``target_probs[:, s]``
are the laws after slot ``s``'s path, and node ``i``'s children were drafted from row ``i + 1``.

Multi-round (recursive) rejection sampling, one node at a time (Miao et al. 2023, SpecInfer,
Algorithm 2; Jeon et al. 2024, recursive speculative decoding; rules.md section 3): at a slot
with target law ``p`` and children ``c_1..c_k`` in index order, keep a residual ``r`` (``p`` at
first); child ``i`` with token ``x`` drawn from ``q_i`` is accepted with probability
``min(1, r(x) / q_i(x))`` and the walk descends into it; on rejection ``r <- norm(max(r - q_i, 0))``.
After the last child is rejected the final token is drawn from ``r``; at a leaf (no children) the
bonus token is drawn from the leaf's target row. The proposal ``q_i`` is what the *rule* assumes:

- ``"iid"``: the slot's draft row (children drawn independently: SpecInfer, Medusa-style sampling);
- ``"without_replacement"``: the draft row with ``c_1..c_{i-1}`` removed and renormalised (EAGLE-1);
- ``"topk"``: the point mass on ``x`` (deterministic top-k drafts: EAGLE-2/3, SGLang), so the
  acceptance is ``r(x)`` and the residual zeroes ``x``;
- a :class:`ThresholdRule`: SGLang's ``tree_speculative_sampling_target_only`` with its
  ``threshold_single`` / ``threshold_acc`` relaxations (one coin per level; lossy below 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._settings import DRAFTING_SCHEMES
from ._law_rows import LawRows

__all__ = ["RULES", "ThresholdRule", "TreeLaws", "acceptance_ratio", "slot_depths", "slot_parents", "tree_laws"]

#: The reference rules, one per drafting scheme (the scheme's name is the rule's name).
RULES = DRAFTING_SCHEMES

#: SGLang caps ``threshold_acc`` below at this value before launching its kernel
#: (``capped_threshold_acc = fmaxf(threshold_acc, 1e-9f)``, speculative_sampling.cuh).
SGLANG_MIN_THRESHOLD_ACC = 1e-9


@dataclass(frozen=True)
class ThresholdRule:
    """SGLang's target-only tree rule with its relaxations (sgl-kernel ``speculative_sampling.cuh``,
    ``TreeSpeculativeSamplingTargetOnly``, commit b227f63): at each level one coin ``u``; the children
    ``x_1, x_2, ...`` are tried in sibling order with ``S_j = sum_{i<=j} p(x_i)``, and ``x_j`` is accepted
    iff ``u <= S_j / threshold_acc`` or ``p(x_j) >= threshold_single``. After the last child the final
    token comes from ``p`` with every tried child zeroed (``relu(p - draft_probs)`` with the rejected
    children's target mass written into ``draft_probs``). With both thresholds 1 the law is the
    ``"topk"`` rule's (lossless); below 1 it accepts more and is lossy."""

    threshold_single: float = 1.0
    threshold_acc: float = 1.0

    def __post_init__(self):
        for name in ("threshold_single", "threshold_acc"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float, np.floating)) and 0.0 <= float(value) <= 1.0):
                raise ValueError(f"{name} must be a number in [0, 1] (SGLang checks the same); got {value!r}.")

    @property
    def name(self) -> str:
        return f"sglang(threshold_single={self.threshold_single:g}, threshold_acc={self.threshold_acc:g})"


@dataclass(frozen=True)
class TreeLaws:
    """The exact law of one tree step per row, by slot (slot 0 the root, slot ``i + 1`` node ``i``).

    - ``slot_parent`` int [B, S]: the parent slot (-1 for the root); ``depth`` int [B, S];
    - ``accept`` [B, N]: node ``i``'s acceptance probability when its turn comes (its parent reached,
      its earlier siblings rejected);
    - ``reach`` [B, S]: probability that the walk reaches the slot (accepts every node of its path);
    - ``stop`` [B, S]: probability that the walk ends at the slot (reaches it, accepts no child);
    - ``final_rows`` (:class:`~specdec_check.exact._law_rows.LawRows`) and ``final_index`` int [B, S]: the
      final token's law given that the walk ends at slot ``s`` of row ``b`` is row ``final_index[b, s]``:
      the residual after every child was rejected, or the target row at a leaf (normalised; all zeros
      where the walk cannot end, e.g. a child accepted with probability 1). Slots with equal laws may
      share a row (:func:`~specdec_check.exact._tree_keyed.tree_laws_keyed`).
    """

    slot_parent: np.ndarray
    depth: np.ndarray
    accept: np.ndarray
    reach: np.ndarray
    stop: np.ndarray
    final_rows: LawRows
    final_index: np.ndarray

    @property
    def final(self) -> np.ndarray:
        """The final token's law by slot, float64 [B, S, V] (gathered: ``final_rows[final_index]``)."""
        return self.final_rows.gather(self.final_index)

    @property
    def max_depth(self) -> int:
        return int(self.depth.max())

    def accepted_length_law(self) -> np.ndarray:
        """``P(K = k)`` [B, D+1]: ``K`` the number of accepted nodes (the depth of the stop slot)."""
        batch, depth = self.stop.shape[0], self.max_depth
        law = np.zeros((batch, depth + 1))
        np.add.at(law, (np.repeat(np.arange(batch), self.stop.shape[1]), self.depth.reshape(-1)),
                  self.stop.reshape(-1))
        return law

    def expected_accepted(self) -> np.ndarray:
        """``E[K]`` [B]: expected accepted nodes per row."""
        return (self.stop * self.depth).sum(axis=1)

    def step_law(self) -> np.ndarray:
        """``P(stop slot = s, final token = y)`` [B, S, V]."""
        return self.stop[..., None] * self.final


def slot_parents(parents: np.ndarray) -> np.ndarray:
    """int64 [B, N+1]: the parent slot of every slot (-1 for the root, ``parents + 1`` for nodes)."""
    parents = np.asarray(parents, dtype=np.int64)
    out = np.empty((parents.shape[0], parents.shape[1] + 1), dtype=np.int64)
    out[:, 0] = -1
    out[:, 1:] = parents + 1
    return out


def slot_depths(slot_parent: np.ndarray) -> np.ndarray:
    """int64 [B, S]: the depth of every slot (the root 0, a root child 1, ...)."""
    batch, slots = slot_parent.shape
    rows = np.arange(batch)
    depth = np.zeros((batch, slots), dtype=np.int64)
    for s in range(1, slots):
        depth[:, s] = depth[rows, slot_parent[:, s]] + 1
    return depth


def acceptance_ratio(residual_at, proposal_at):
    """``min(1, r(x) / q(x))`` with ``q(x) = 0``: 1 if ``r(x) > 0`` else 0 (a point the proposal cannot
    draw is accepted exactly when the residual wants it), elementwise on arrays."""
    positive = proposal_at > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(positive, residual_at / np.where(positive, proposal_at, 1.0),
                         np.where(residual_at > 0, 1.0, 0.0))
    return np.minimum(ratio, 1.0)


def _normalise(rows: np.ndarray) -> np.ndarray:
    total = rows.sum(axis=-1, keepdims=True)
    return np.divide(rows, total, out=np.zeros_like(rows), where=total > 0)


def tree_laws(parents, draft_token_ids, draft_probs, target_probs, rule) -> TreeLaws:
    """The exact per-row law of one tree step under ``rule`` (see the module docstring), unvalidated.

    ``parents`` int [B, N], ``draft_token_ids`` int [B, N], ``draft_probs`` / ``target_probs``
    float64 [B, N+1, V]; ``rule`` one of :data:`RULES` or a :class:`ThresholdRule`. Nodes are
    processed in index order (a node's parent and earlier siblings come first), vectorised over
    the batch: O(N B V).
    """
    ids = np.asarray(draft_token_ids, dtype=np.int64)
    target = np.asarray(target_probs, dtype=np.float64)
    draft = np.asarray(draft_probs, dtype=np.float64)
    batch, nodes = ids.shape
    rows = np.arange(batch)
    slot_parent = slot_parents(parents)
    depth = slot_depths(slot_parent)
    threshold = rule if isinstance(rule, ThresholdRule) else None
    if threshold is None and rule not in RULES:
        raise ValueError(f"rule must be one of {RULES} or a ThresholdRule; got {rule!r}.")
    residual = target.copy()  # the current residual of every slot (its target row until a child is rejected)
    alive = np.ones((batch, nodes + 1))  # P(no child of the slot accepted yet | slot reached)
    reach = np.zeros((batch, nodes + 1))
    reach[:, 0] = 1.0
    accept = np.zeros((batch, nodes))
    remaining = draft.copy() if rule == "without_replacement" else None  # draft rows, drawn siblings zeroed
    tried = np.zeros((batch, nodes + 1)) if threshold is not None else None  # S_{j-1}: target mass tried
    static = bool((slot_parent == slot_parent[0]).all())  # one shape for every row: slices, no gathers
    for i in range(nodes):
        x = ids[:, i]
        u = int(slot_parent[0, i + 1]) if static else slot_parent[:, i + 1]
        at = (slice(None), u) if static else (rows, u)
        r = residual[at].copy() if static else residual[at]  # [B, V]
        r_x = r[rows, x]
        if threshold is not None:
            p_x = target[rows, u, x]
            ta = max(float(threshold.threshold_acc), SGLANG_MIN_THRESHOLD_ACC)
            before = np.minimum(1.0, tried[at] / ta)
            after = np.minimum(1.0, (tried[at] + p_x) / ta)
            with np.errstate(divide="ignore", invalid="ignore"):
                a = np.where(before < 1.0, (after - before) / (1.0 - before), 0.0)
            a = np.where(p_x >= threshold.threshold_single, 1.0, a)
            tried[at] += p_x
            r[rows, x] = 0.0
            r = _normalise(r)
        elif rule == "topk":
            a = np.minimum(r_x, 1.0)
            r[rows, x] = 0.0
            r = _normalise(r)
        else:
            if rule == "iid":
                q = draft[at]
            else:
                left = remaining[at].copy() if static else remaining[at]
                q = _normalise(left)
                left[rows, x] = 0.0
                remaining[at] = left
            a = acceptance_ratio(r_x, q[rows, x])
            r = _normalise(np.maximum(r - q, 0.0))
        accept[:, i] = a
        reach[:, i + 1] = reach[at] * alive[at] * a
        alive[at] *= 1.0 - a
        residual[at] = r
    stop = reach * alive
    return TreeLaws(slot_parent=slot_parent, depth=depth, accept=accept, reach=reach, stop=stop,
                    final_rows=LawRows(residual.reshape(batch * (nodes + 1), -1)),
                    final_index=np.arange(batch * (nodes + 1)).reshape(batch, nodes + 1))
