"""The reference tree verifiers in torch (any device and dtype): the numpy references' algorithm.

See :mod:`specdec_check.samplers._tree_numpy` for the contract and the rules. Inputs stay on
their device; the walk is vectorised over the batch, one node at a time.
"""

from __future__ import annotations

import torch

__all__ = ["torch_verify_tree_iid", "torch_verify_tree_topk", "torch_verify_tree_without_replacement"]


def _normalise(rows):
    total = rows.sum(dim=1, keepdim=True)
    return torch.where(total > 0, rows / torch.where(total > 0, total, torch.ones_like(total)), torch.zeros_like(rows))


def _ratio(residual_at, proposal_at):
    safe = torch.where(proposal_at > 0, proposal_at, torch.ones_like(proposal_at))
    inf = torch.full_like(residual_at, float("inf"))
    return torch.where(proposal_at > 0, residual_at / safe,
                       torch.where(residual_at > 0, inf, torch.zeros_like(residual_at)))


def _verify_tree(rule, parents, draft_token_ids, draft_probs, target_probs, generator):
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator; got {type(generator).__name__}.")
    device = target_probs.device
    parents = torch.as_tensor(parents, device=device).long()
    ids = torch.as_tensor(draft_token_ids, device=device).long()
    target, draft = target_probs, draft_probs
    batch, nodes = ids.shape
    vocab = target.shape[-1]
    if tuple(parents.shape) != (batch, nodes) or tuple(target.shape) != (batch, nodes + 1, vocab) \
            or tuple(draft.shape) != tuple(target.shape):
        raise ValueError("expected parents and draft_token_ids [B, N], draft_probs and target_probs [B, N+1, V].")
    coins = torch.rand((batch, nodes + 1), generator=generator, device=device, dtype=torch.float64).to(target.dtype)
    depth = torch.zeros((batch, nodes + 1), dtype=torch.long, device=device)
    rows_all = torch.arange(batch, device=device)
    for i in range(nodes):
        depth[:, i + 1] = depth[rows_all, parents[:, i] + 1] + 1
    width = int(depth.max()) + 1
    out = torch.full((batch, width), -1, dtype=torch.long, device=device)
    current = torch.zeros(batch, dtype=torch.long, device=device)
    emitted = torch.zeros(batch, dtype=torch.long, device=device)
    residual = target[:, 0].clone()
    left = draft[:, 0].clone() if rule == "without_replacement" else None
    for i in range(nodes):
        rows = (parents[:, i] + 1 == current).nonzero()[:, 0]
        if rows.numel() == 0:
            continue
        x = ids[rows, i]
        at = torch.arange(rows.numel(), device=device)
        r = residual[rows]
        if rule == "topk":
            q, q_x = None, torch.ones(rows.numel(), dtype=target.dtype, device=device)
        elif rule == "iid":
            q = draft[rows, current[rows]]
            q_x = q[at, x]
        else:
            q = _normalise(left[rows])
            q_x = q[at, x]
        r_x = r[at, x]
        if not bool(torch.isfinite(r_x).all() & torch.isfinite(q_x).all()):
            raise ValueError("target_probs or draft_probs is NaN or infinite at a drafted token.")
        accepted = coins[rows, i] < _ratio(r_x, q_x)
        hit, miss = rows[accepted], rows[~accepted]
        out[hit, emitted[hit]] = x[accepted]
        emitted[hit] += 1
        current[hit] = i + 1
        residual[hit] = target[hit, i + 1]
        if left is not None:
            left[hit] = draft[hit, i + 1]
            left[miss, x[~accepted]] = 0.0
        r, missed = r[~accepted], at[~accepted]
        if rule == "topk":
            r[torch.arange(missed.numel(), device=device), x[~accepted]] = 0.0
            residual[miss] = _normalise(r)
        else:
            residual[miss] = _normalise((r - q[missed]).clamp(min=0.0))
    cdf = residual.cumsum(dim=1)
    total = cdf[:, -1]
    if not bool(torch.isfinite(total).all()):
        raise ValueError("target_probs or draft_probs is NaN or infinite in a row the step samples from.")
    token = (cdf <= (coins[:, nodes] * total)[:, None]).sum(dim=1)
    over = token >= vocab
    if bool(over.any()):
        positive = residual[over] > 0
        if not bool(positive.any(dim=1).all()):
            raise ValueError("the law of a final token has no mass (inputs that are not probability rows?).")
        token[over] = vocab - 1 - positive.flip(1).to(torch.uint8).argmax(dim=1)
    out[rows_all, emitted] = token
    return out


def torch_verify_tree_iid(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """:func:`~specdec_check.samplers.numpy_verify_tree_iid` in torch."""
    return _verify_tree("iid", parents, draft_token_ids, draft_probs, target_probs, generator)


def torch_verify_tree_without_replacement(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """:func:`~specdec_check.samplers.numpy_verify_tree_without_replacement` in torch."""
    return _verify_tree("without_replacement", parents, draft_token_ids, draft_probs, target_probs, generator)


def torch_verify_tree_topk(*, parents, draft_token_ids, draft_probs, target_probs, generator):
    """:func:`~specdec_check.samplers.numpy_verify_tree_topk` in torch."""
    return _verify_tree("topk", parents, draft_token_ids, draft_probs, target_probs, generator)


torch_verify_tree_iid.drafting = "iid"
torch_verify_tree_without_replacement.drafting = "without_replacement"
torch_verify_tree_topk.drafting = "topk"
