"""The peers' sampler tests, reimplemented over the verifier contract, as baselines.

Each function takes ``(verify, *, seed, budget)`` (``budget`` = the number of verifier rows
it may use) and returns ``detected: bool`` (True when the peer's test would fail the
verifier). Designs follow /work/shared/research/peers.md:

* ``vllm_method``: V=10, identical near-uniform rows softmax(rand(10)), k=1; L2 distance of
  the pooled histogram (bonus column dropped) to the target at 10 and at ``budget`` samples;
  pass iff d_target[10]/d_target[n] > 20 * d_ref[10]/d_ref[n] (mean over 100 random references).
* ``tileops_method``: ``budget`` rows, V=16, k=2, rows rand**3 normalised, each position
  different; per-index |count - n p| <= 6 sqrt(n p (1-p)) + 5 [p > 0] on the first token, the
  token at each stop position, and the accepted count; structure and seeded determinism.
* ``trtllm_method``: V=500 with 400 entries of each law zeroed, k=1, ``budget`` iterations;
  |KL(p || verifier's first token) - KL(p || plain multinomial)| < 0.01.
* ``flashinfer_method``: output validity only (ids < V, the accepted prefix equals the drafts,
  -1 after the first mismatch) over k in {1, 3, 5, 7}, plus the one-hot-target exact case.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PEER_METHODS", "flashinfer_method", "tileops_method", "trtllm_method", "vllm_method"]


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _draw(probs, rng, n):
    """n draws from one law ``probs`` [V]."""
    return rng.choice(probs.size, size=n, p=probs / probs.sum())


def _call(verify, ids, q, p, generator):
    """Run ``verify``; an exception counts as detection (returns None)."""
    try:
        return np.asarray(verify(draft_token_ids=ids, draft_probs=q, target_probs=p, generator=generator)).astype(np.int64)
    except Exception:
        return None


def _chunks(n, size):
    while n > 0:
        yield min(n, size)
        n -= size


def vllm_method(verify, *, seed=0, budget=100_000):
    """vLLM ``test_rejection_sampling_approximates_target_distribution`` (v0, k=1)."""
    rng = np.random.default_rng(seed)
    vocab, k = 10, 1
    draft, target = _softmax(rng.random(vocab)), _softmax(rng.random(vocab))
    refs = _softmax(rng.random((100, vocab)))
    sizes = (10, max(int(budget) - 10, 10))
    d_target, d_ref = [], []
    gen = np.random.default_rng(seed + 1)
    for n in sizes:
        counts = np.zeros(vocab)
        for m in _chunks(n, 50_000):
            ids = _draw(draft, rng, m)[:, None]
            out = _call(verify, ids, np.broadcast_to(draft, (m, k, vocab)).copy(),
                        np.broadcast_to(target, (m, k + 1, vocab)).copy(), gen)
            if out is None or out.shape != (m, k + 1):
                return True
            vals = out[:, :-1].ravel()
            counts += np.bincount(vals[(vals >= 0) & (vals < vocab)], minlength=vocab)[:vocab]
        pdf = counts / max(counts.sum(), 1.0)
        d_target.append(np.linalg.norm(pdf - target))
        d_ref.append(np.linalg.norm(refs - pdf, axis=1).mean())
    with np.errstate(divide="ignore", invalid="ignore"):
        passed = (d_target[0] / d_target[1]) > 20 * (d_ref[0] / d_ref[1])
    return not bool(passed)


def _bound_ok(counts, probs, n):
    expected = n * probs
    bound = 6 * np.sqrt(n * probs * (1 - probs)) + 5 * (probs > 0)
    return bool(np.all(np.abs(counts - expected) <= bound))


def tileops_method(verify, *, seed=0, budget=65_536):
    """TileOPs ``test_chain_speculative_sampling``: per-index 6-sigma + 5 bounds on every conditional."""
    rng = np.random.default_rng(seed)
    vocab, k = 16, 2
    target = rng.random((k + 1, vocab)) ** 3
    target /= target.sum(-1, keepdims=True)
    draft = rng.random((k, vocab)) ** 3
    draft /= draft.sum(-1, keepdims=True)
    n = int(budget)
    first = np.zeros(vocab)
    at_stop = np.zeros((k + 1, vocab))
    accepted = np.zeros(k + 1)
    gen = np.random.default_rng(seed + 1)
    for m in _chunks(n, 65_536):
        ids = np.stack([_draw(draft[i], rng, m) for i in range(k)], axis=1)
        q = np.broadcast_to(draft, (m, k, vocab)).copy()
        p = np.broadcast_to(target, (m, k + 1, vocab)).copy()
        out = _call(verify, ids, q, p, gen)
        if out is None or out.shape != (m, k + 1) or (out >= vocab).any() or (out < -1).any():
            return True
        match = np.cumprod(out[:, :k] == ids, axis=1).sum(axis=1)  # accepted prefix length
        token = out[np.arange(m), match]
        after = np.arange(k + 1)[None, :] > match[:, None]
        if (token < 0).any() or (out[after] != -1).any():
            return True
        accepted += np.bincount(match, minlength=k + 1)
        first += np.bincount(out[:, 0], minlength=vocab)
        np.add.at(at_stop, (match, token), 1)
    if not _bound_ok(first, target[0], n):
        return True
    a = np.minimum(target[:k], draft).sum(axis=1)
    law = np.array([1 - a[0], a[0] * (1 - a[1]), a[0] * a[1]])
    if not _bound_ok(accepted, law, n):
        return True
    for s in range(k + 1):
        cond = target[k] if s == k else np.maximum(target[s] - draft[s], 0)
        total = at_stop[s].sum()
        if cond.sum() <= 0:
            if total:
                return True
            continue
        if not _bound_ok(at_stop[s], cond / cond.sum(), total):
            return True
    # seeded determinism
    ids = np.stack([_draw(draft[i], rng, 256) for i in range(k)], axis=1)
    q = np.broadcast_to(draft, (256, k, vocab)).copy()
    p = np.broadcast_to(target, (256, k + 1, vocab)).copy()
    a_out = _call(verify, ids, q, p, np.random.default_rng(seed + 2))
    b_out = _call(verify, ids, q, p, np.random.default_rng(seed + 2))
    return a_out is None or b_out is None or not np.array_equal(a_out, b_out)


def trtllm_method(verify, *, seed=0, budget=50_000):
    """TensorRT-LLM rejection-sampling unit test: KL tolerance 0.01 against plain multinomial sampling, k=1."""
    rng = np.random.default_rng(seed)
    vocab = 500
    laws = rng.random((2, vocab))
    for row in laws:
        row[rng.choice(vocab, 400, replace=False)] = 0.0
    laws /= laws.sum(-1, keepdims=True)
    draft, target = laws
    n = int(budget)
    counts = np.zeros(vocab)
    gen = np.random.default_rng(seed + 1)
    for m in _chunks(n, 10_000):
        ids = _draw(draft, rng, m)[:, None]
        out = _call(verify, ids, np.broadcast_to(draft, (m, 1, vocab)).copy(),
                    np.broadcast_to(target, (m, 2, vocab)).copy(), gen)
        if out is None or out.shape != (m, 2) or (out[:, 0] < 0).any() or (out >= vocab).any():
            return True
        counts += np.bincount(out[:, 0], minlength=vocab)
    plain = np.bincount(_draw(target, rng, n), minlength=vocab)

    def kl(emp):
        emp = np.maximum(emp / n, 1e-12)
        s = target > 0
        return float(np.sum(target[s] * np.log(target[s] / emp[s])))

    return not abs(kl(counts) - kl(plain)) < 0.01


def flashinfer_method(verify, *, seed=0, budget=4_000):
    """FlashInfer ``test_chain_speculative_sampling``: output validity plus the one-hot-target exact case."""
    rng = np.random.default_rng(seed)
    vocab = 111
    per_case = max(int(budget) // 8, 1)
    gen = np.random.default_rng(seed + 1)
    for k in (1, 3, 5, 7):
        for onehot in (False, True):
            b = per_case
            q = rng.random((b, k, vocab))
            q /= q.sum(-1, keepdims=True)
            ids = np.stack([[rng.choice(vocab, p=q[r, i]) for i in range(k)] for r in range(b)]) if b <= 64 else \
                np.stack([(q[:, i].cumsum(-1) < rng.random((b, 1))).sum(-1).clip(max=vocab - 1) for i in range(k)], 1)
            if onehot:
                target_ids = np.concatenate([ids, rng.integers(0, vocab, (b, 1))], axis=1)
                p = np.zeros((b, k + 1, vocab))
                np.put_along_axis(p, target_ids[..., None], 1.0, axis=2)
            else:
                p = rng.random((b, k + 1, vocab))
                p /= p.sum(-1, keepdims=True)
            out = _call(verify, ids, q, p, gen)
            if out is None or out.shape != (b, k + 1) or (out >= vocab).any() or (out < -1).any():
                return True
            if onehot:
                if not np.array_equal(out, target_ids):
                    return True
                continue
            match = np.cumprod(out[:, :k] == ids, axis=1).sum(axis=1)
            after = np.arange(k + 1)[None, :] > match[:, None]
            if (out[after] != -1).any() or (out[np.arange(b), match] < 0).any():
                return True
    return False


PEER_METHODS = {
    "vLLM": vllm_method,
    "TileOPs": tileops_method,
    "TRT-LLM": trtllm_method,
    "FlashInfer": flashinfer_method,
}
