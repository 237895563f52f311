"""Shared pieces of the rule tests: row sets, drafts, and an exactly calibrated step-law test.

One row set (target rows p [gamma+1, V], draft rows q [gamma, V]) tiled n times, drafts drawn
from q: each row's (drafted path, accepted count k, final token y) is an i.i.d. draw from
``q(path) * law(k, y | path)``, so the n rows' cell counts are exactly multinomial and
``stats.identity_test`` (exact, conservative for fixed n) at ``ALPHA = 1e-9`` is calibrated.
"""

from __future__ import annotations

import itertools

import numpy as np

from specdec_check import stats
from specdec_check.samplers import categorical

ALPHA = 1e-9


def row_set(seed, gamma, vocab, *, zeros=True):
    """Peaked rows (rand**3, normalised) differing per position; with ``zeros``, p = 0 at a token q
    proposes and q = 0 at a token p wants (the residual and impossible-event edge cases)."""
    rng = np.random.default_rng(seed)
    p = rng.random((gamma + 1, vocab)) ** 3 + 1e-3
    q = rng.random((gamma, vocab)) ** 3 + 1e-3
    if zeros:
        p[:, 0] = 0.0
        q[:, 1] = 0.0
    return q / q.sum(-1, keepdims=True), p / p.sum(-1, keepdims=True)


def all_paths(vocab, gamma):
    return np.array(list(itertools.product(range(vocab), repeat=gamma)), dtype=np.int64).reshape(-1, gamma)


def tiled_inputs(q, p, n, seed):
    """``n`` copies of the row set with drafts drawn from q: ids [n, g], draft [n, g, V], target [n, g+1, V]."""
    rng = np.random.default_rng(seed)
    gamma = q.shape[0]
    dq = np.ascontiguousarray(np.broadcast_to(q, (n,) + q.shape))
    tp = np.ascontiguousarray(np.broadcast_to(p, (n,) + p.shape))
    ids = np.stack([categorical(dq[:, i], rng) for i in range(gamma)], axis=1) if gamma else np.zeros((n, 0), int)
    return ids.astype(np.int64), dq, tp


def parse_outputs(out, ids):
    """(k, y) per row after checking the contract's shape: accepted prefix = drafts, one final token, -1 after."""
    out = np.asarray(out)
    gamma = ids.shape[1]
    k = (out >= 0).sum(axis=1) - 1
    cols = np.arange(gamma + 1)
    assert (k >= 0).all(), "a row emitted no token"
    assert ((out >= 0) == (cols <= k[:, None])).all(), "-1 padding is not a suffix"
    prefix = cols[:gamma] < k[:, None]
    assert (np.where(prefix, out[:, :gamma], ids) == ids).all(), "the accepted prefix differs from the drafts"
    return k, out[np.arange(out.shape[0]), k]


def path_cell_law(step_law, q, p):
    """Exact law over cells (path, k, y): ``q(path) * step_law(path)[k, y]``, float64 [V^g * (g+1) * V]."""
    gamma, vocab = q.shape[0], p.shape[1]
    paths = all_paths(vocab, gamma)
    weight = np.prod(q[np.arange(gamma), paths], axis=1) if gamma else np.ones(1)
    drawn = weight > 0
    law = np.zeros((paths.shape[0], gamma + 1, vocab))
    law[drawn] = step_law(draft_token_ids=paths[drawn],
                          draft_probs=np.broadcast_to(q, (drawn.sum(),) + q.shape).copy(),
                          target_probs=np.broadcast_to(p, (drawn.sum(),) + p.shape).copy())
    return (law * weight[:, None, None]).reshape(-1)


def path_cell_counts(out, ids, vocab):
    gamma = ids.shape[1]
    k, y = parse_outputs(out, ids)
    path = ids @ (vocab ** np.arange(gamma - 1, -1, -1)) if gamma else np.zeros(ids.shape[0], int)
    cells = (path * (gamma + 1) + k) * vocab + y
    return np.bincount(cells, minlength=vocab**gamma * (gamma + 1) * vocab)


def step_law_test(verify, step_law, q, p, *, n, seed, alpha=ALPHA):
    """Run ``verify`` on ``n`` tiled rows and test the (path, k, y) counts against ``step_law`` exactly."""
    ids, dq, tp = tiled_inputs(q, p, n, seed)
    out = verify(draft_token_ids=ids, draft_probs=dq, target_probs=tp, generator=np.random.default_rng(seed + 1))
    counts = path_cell_counts(out, ids, p.shape[1])
    return stats.identity_test(counts, path_cell_law(step_law, q, p), alpha=alpha)
