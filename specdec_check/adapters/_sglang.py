"""SGLang ``tree_speculative_sampling_target_only`` -> tree-verifier contract.

SGLang's calling convention (sgl-kernel ``speculative.py`` / ``speculative_sampling.cu``, commit
c28bdc9012d29bed6b96688a44d6788157ef3d86)::

    tree_speculative_sampling_target_only(
        predicts,             # int32 [B * num_draft_tokens], written: the next token after each accepted node
        accept_index,         # int32 [B, num_spec_step], written: slots of the root and the accepted nodes
        accept_token_num,     # int32 [B], written: accepted nodes
        candidates,           # int64 [B, num_draft_tokens]: node 0 the root (last verified token), then the drafts
        retrive_index,        # int64 [B, num_draft_tokens]: node -> slot in predicts
        retrive_next_token,   # int64 [B, num_draft_tokens]: first child, -1 none
        retrive_next_sibling, # int64 [B, num_draft_tokens]: next sibling, -1 none
        uniform_samples,      # float32 [B, num_draft_tokens]: one coin per level, the one of the last accepted node
        uniform_samples_for_final_sampling,  # float32 [B]
        target_probs,         # float32 [B, num_draft_tokens, V]: row j the target's law after node j's path
        draft_probs,          # float32 [B, num_draft_tokens, V]: zeros in target-only mode (written into);
                              #   dropped from the signature in later versions
        threshold_single=1.0, threshold_acc=1.0, deterministic=True)

The contract's slot ``s`` (0 the root, ``i + 1`` node ``i``) is SGLang's node ``s``, so the target
rows are handed over as they are; siblings are ordered by index. ``num_spec_step`` is the batch's
depth + 1. Coins come from the checker's generator (``uniform_samples`` first, then the final
coins), so a seed replays a call.
"""

from __future__ import annotations

import inspect

import numpy as np
import torch

__all__ = ["from_sglang_tree", "sglang_tree_layout"]


def sglang_tree_layout(parents: torch.Tensor):
    """``(retrive_next_token, retrive_next_sibling, depth)`` for ``parents`` int [B, N]: first child and
    next sibling of every SGLang node (node 0 the root, node ``i + 1`` the contract's node ``i``; siblings
    in index order), int64 [B, N+1] each, and the batch's depth.

    Example: a root with two children, the first of which has a child (contract parents ``[-1, -1, 0]``)::

        >>> first, sibling, depth = sglang_tree_layout(torch.tensor([[-1, -1, 0]]))
        >>> first.tolist(), sibling.tolist(), depth
        ([[1, 3, -1, -1]], [[-1, 2, -1, -1]], 2)
    """
    batch, nodes = parents.shape
    device = parents.device
    slot_parent = parents.long() + 1  # [B, N]: parent node of nodes 1..N
    first = torch.full((batch, nodes + 1), -1, dtype=torch.long, device=device)
    sibling = torch.full((batch, nodes + 1), -1, dtype=torch.long, device=device)
    last = torch.full((batch, nodes + 1), -1, dtype=torch.long, device=device)  # last child seen, per parent
    depth = torch.zeros((batch, nodes + 1), dtype=torch.long, device=device)
    rows = torch.arange(batch, device=device)
    for i in range(nodes):
        node, parent = i + 1, slot_parent[:, i]
        depth[:, node] = depth[rows, parent] + 1
        prev = last[rows, parent]
        first[rows, parent] = torch.where(prev < 0, torch.full_like(prev, node), first[rows, parent])
        has = prev >= 0
        sibling[rows[has], prev[has]] = node
        last[rows, parent] = node
    return first, sibling, int(depth.max()) if nodes else 0


#: float32 coins have 24 random bits, as ``torch.rand(dtype=torch.float32)`` draws them: multiples of 2^-24 in
#: [0, 1). (Rounding a float64 uniform to float32 instead could give exactly 1.0, which no uniform in [0, 1) is.)
COIN_BITS = 24


def _coins(generator, shape, device):
    if isinstance(generator, torch.Generator):
        return torch.rand(shape, generator=generator, device=device, dtype=torch.float32)
    if isinstance(generator, np.random.Generator):
        bits = generator.integers(0, 1 << COIN_BITS, size=shape, dtype=np.int64)
        return torch.from_numpy((bits * 2.0**-COIN_BITS).astype(np.float32)).to(device)
    raise TypeError(f"generator must be a torch.Generator or a numpy.random.Generator; got {type(generator).__name__}.")


def from_sglang_tree(kernel, *, threshold_single: float = 1.0, threshold_acc: float = 1.0, check_finite: bool = True):
    """Wrap SGLang's ``tree_speculative_sampling_target_only`` (or a function with its signature) as a
    tree verifier ``verify_tree(*, parents, draft_token_ids, draft_probs, target_probs, generator)``.

    Target-only mode: ``draft_probs`` handed to the kernel are zeros (as SGLang's EAGLE worker passes
    them), so the rule is SGLang's: sample the target, walk the tree while the sample is a child, which
    is the one-hot rule of ``drafting="topk"`` when both thresholds are 1 (lossless) and lossy below.
    Inputs may be numpy arrays (the numpy backend: run on the CPU, output numpy) or torch tensors.
    ``check_finite`` raises ``ValueError`` on NaN or infinite target rows before the kernel runs (the
    kernel does not check; SGLang's worker computes the rows by a softmax): pass False to see what the
    kernel itself does with them.

    Example::

        from sgl_kernel import tree_speculative_sampling_target_only
        from specdec_check.adapters import from_sglang_tree
        from specdec_check.checker import check_tree_verifier

        verify_tree = from_sglang_tree(tree_speculative_sampling_target_only)
        print(check_tree_verifier(verify_tree, drafting="topk", backend="torch", device="cuda").summary())
    """
    if not callable(kernel):
        raise TypeError(f"from_sglang_tree needs tree_speculative_sampling_target_only (a callable); got "
                        f"{type(kernel).__name__}.")
    try:
        takes_draft = "draft_probs" in inspect.signature(kernel).parameters
    except (TypeError, ValueError):  # an extension op without a signature: the version that takes draft_probs
        takes_draft = True

    def verify_tree(*, parents, draft_token_ids, draft_probs, target_probs, generator):
        host = isinstance(target_probs, np.ndarray)
        device = torch.device("cpu") if host else target_probs.device
        parents = torch.as_tensor(np.array(parents, dtype=np.int64) if host else parents, device=device).long()
        ids = torch.as_tensor(np.array(draft_token_ids, dtype=np.int64) if host else draft_token_ids,
                              device=device).long()
        target = (torch.from_numpy(np.asarray(target_probs, dtype=np.float32)) if host
                  else target_probs.to(torch.float32)).contiguous()
        if check_finite and not bool(torch.isfinite(target).all()):
            raise ValueError("target_probs holds a NaN or infinite probability.")
        batch, nodes = ids.shape
        first, sibling, depth = sglang_tree_layout(parents)
        steps = depth + 1
        candidates = torch.cat([torch.zeros((batch, 1), dtype=torch.long, device=device), ids], dim=1)
        slots = nodes + 1
        retrive_index = torch.arange(batch * slots, dtype=torch.long, device=device).reshape(batch, slots)
        uniform = _coins(generator, (batch, slots), device)
        final = _coins(generator, (batch,), device)
        predicts = torch.full((batch * slots,), -1, dtype=torch.int32, device=device)
        accept_index = torch.full((batch, steps), -1, dtype=torch.int32, device=device)
        accept_num = torch.zeros(batch, dtype=torch.int32, device=device)
        kwargs = dict(predicts=predicts, accept_index=accept_index, accept_token_num=accept_num, candidates=candidates,
                      retrive_index=retrive_index, retrive_next_token=first, retrive_next_sibling=sibling,
                      uniform_samples=uniform, uniform_samples_for_final_sampling=final, target_probs=target,
                      threshold_single=threshold_single, threshold_acc=threshold_acc, deterministic=True)
        if takes_draft:
            kwargs["draft_probs"] = torch.zeros_like(target)
        kernel(**kwargs)
        count = accept_num.long()
        cols = torch.arange(steps, device=device)
        index = accept_index.long().clamp(min=0)
        out = torch.where(cols <= count[:, None], predicts.long()[index], torch.full_like(index, -1))
        return out.cpu().numpy() if host else out

    label = getattr(kernel, "__qualname__", None) or type(kernel).__name__
    verify_tree.__name__ = verify_tree.__qualname__ = f"from_sglang_tree({label})"
    verify_tree.__wrapped_peer__ = kernel
    verify_tree.drafting = "topk"
    return verify_tree
