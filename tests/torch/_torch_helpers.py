"""Shared statistics for the torch tests: exact path laws and a calibrated G-test.

Every statistical assertion compares sampled outcomes of tiled rows with
``specdec_check.exact.path_step_law`` by a G-test (likelihood ratio, chi-square reference)
at ``ALPHA = 1e-9``: a correct sampler fails one such test with probability about 1e-9, so
the whole torch suite (< 100 such tests) false-alarms with probability < 1e-7. Seeds are fixed,
so every run is reproducible. Outcomes the exact law gives probability 0 must never occur.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import stats

from specdec_check import exact
from specdec_check._torch_utils import cast_law_rows

ALPHA = 1e-9
MIN_EXPECTED = 5.0


def random_rows(seed: int, batch: int, gamma: int, vocab: int, *, concentration: float = 0.6,
                zero_frac: float = 0.25):
    """Heterogeneous rows: different p and q per row and position, some zero entries; drafts drawn from q."""
    rng = np.random.default_rng(seed)

    def laws(shape):
        x = rng.gamma(concentration, size=shape + (vocab,))
        x[rng.random(x.shape) < zero_frac] = 0.0
        x[..., 0] += 1e-3 * (x.sum(-1) == 0)  # no empty row
        return x / x.sum(-1, keepdims=True)

    p = laws((batch, gamma + 1))
    q = laws((batch, gamma))
    ids = np.zeros((batch, gamma), dtype=np.int64)
    for b in range(batch):
        for i in range(gamma):
            ids[b, i] = rng.choice(vocab, p=q[b, i])
    return ids, q, p


def tile(x: np.ndarray, n: int, dtype=None, device="cpu") -> torch.Tensor:
    """Repeat each row ``n`` times (row r of the result comes from row r // n)."""
    t = torch.from_numpy(np.repeat(x, n, axis=0))
    if dtype is not None:
        t = t.to(dtype)
    return t.to(device)


def outcome_counts(out: np.ndarray, batch: int, n: int, vocab: int) -> np.ndarray:
    """Counts [batch, gamma+1, V] of (accepted count k, final token y) per distinct row."""
    out = np.asarray(out)
    gamma = out.shape[1] - 1
    k = (out >= 0).sum(axis=1) - 1
    assert (k >= 0).all(), "a row emitted no token"
    y = out[np.arange(out.shape[0]), k]
    counts = np.zeros((batch, gamma + 1, vocab), dtype=np.int64)
    np.add.at(counts, (np.arange(out.shape[0]) // n, k, y), 1)
    return counts


def check_format(out: np.ndarray, ids: np.ndarray, n: int, vocab: int) -> None:
    """Accepted prefix equals the drafts, one final token in range, -1 after."""
    out = np.asarray(out)
    gamma = out.shape[1] - 1
    k = (out >= 0).sum(axis=1) - 1
    cols = np.arange(gamma + 1)
    assert ((out >= 0) == (cols <= k[:, None])).all(), "-1 padding is not a suffix"
    drafts = np.repeat(ids, n, axis=0)
    prefix = cols[:gamma] < k[:, None]
    assert (np.where(prefix, out[:, :gamma], drafts) == drafts).all(), "accepted prefix differs from drafts"
    assert (out < vocab).all()


def g_test(counts: np.ndarray, law: np.ndarray) -> tuple:
    """Product-multinomial G-test of counts [B, ...] against law [B, ...]; returns (pvalue, impossible_count).

    Outcomes with expected count < MIN_EXPECTED are pooled per row into one bin.
    """
    counts = counts.reshape(counts.shape[0], -1).astype(np.float64)
    law = law.reshape(law.shape[0], -1)
    impossible = int(counts[law <= 0].sum())
    g, df = 0.0, 0
    for c, lw in zip(counts, law):
        n = c.sum()
        e = n * lw
        big = e >= MIN_EXPECTED
        obs = list(c[big])
        exp_ = list(e[big])
        rest_e = e[~big & (lw > 0)].sum()
        if rest_e > 0:
            obs.append(c[~big & (lw > 0)].sum())
            exp_.append(rest_e)
        obs, exp_ = np.array(obs), np.array(exp_)
        if len(obs) < 2:
            continue
        nz = obs > 0
        g += 2.0 * float((obs[nz] * np.log(obs[nz] / exp_[nz])).sum())
        df += len(obs) - 1
    pvalue = float(stats.chi2.sf(g, df)) if df else 1.0
    return pvalue, impossible


def law_of(ids, q, p, dtype=torch.float64) -> np.ndarray:
    """Exact step law of rows as a sampler sees them in ``dtype`` (cast, renormalised)."""
    return exact.path_step_law(ids, cast_law_rows(q, dtype), cast_law_rows(p, dtype))


def verify_pvalue(verify, ids, q, p, *, n: int, seed: int = 0, dtype=torch.float32, device="cpu") -> tuple:
    """Run ``verify`` on tiled rows and return (pvalue, impossible) against the exact law."""
    batch, vocab = ids.shape[0], p.shape[-1]
    gen = torch.Generator(device=device).manual_seed(seed)
    out = verify(draft_token_ids=tile(ids, n, device=device), draft_probs=tile(q, n, dtype, device),
                 target_probs=tile(p, n, dtype, device), generator=gen)
    out = out.cpu().numpy()
    check_format(out, ids, n, vocab)
    return g_test(outcome_counts(out, batch, n, vocab), law_of(ids, q, p, dtype))


#: Mark for tests that need a CUDA device: skipped, with the reason shown, on machines without one.
import pytest  # noqa: E402

requires_cuda = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; none here"),
]


def cuda_test(fn):
    for mark in reversed(requires_cuda):
        fn = mark(fn)
    return fn
