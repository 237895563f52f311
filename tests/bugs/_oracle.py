"""Direct oracle comparisons for the catalogue tests (no checker involved)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from specdec_check.exact import path_step_law
from specdec_check.samplers import categorical

ALPHA = 1e-9
MIN_EXPECTED = 20.0


def fixed_rows(seed=7, batch=3, gamma=2, vocab=5):
    """Peaked rows (rand**3 normalised), different per row and position, with zeros in p and q."""
    rng = np.random.default_rng(seed)
    p = rng.random((batch, gamma + 1, vocab)) ** 3
    q = rng.random((batch, gamma, vocab)) ** 3
    p[0, :, 0] = 0.0   # drafted tokens the target forbids
    q[1, :, 1] = 0.0   # target mass the draft never proposes
    p /= p.sum(-1, keepdims=True)
    q /= q.sum(-1, keepdims=True)
    return q, p


def tiled_inputs(q, p, n_per_row, seed):
    """Tile the fixed rows ``n_per_row`` times and draw the drafts from q."""
    rng = np.random.default_rng(seed)
    batch, gamma, vocab = q.shape
    group = np.repeat(np.arange(batch), n_per_row)
    dq, tp = q[group], p[group]
    ids = np.stack([categorical(dq[:, i], rng) for i in range(gamma)], axis=1)
    return group, ids, dq, tp


def step_cells(out, ids, group, batch, gamma, vocab):
    """Counts per (row group, k accepted, final token y); y = V codes 'no final token'.

    A row that emitted exactly its gamma drafts and nothing else is (k = gamma, no final token).
    """
    emitted = (out >= 0).sum(axis=1)
    k = np.clip(emitted - 1, 0, gamma)
    y = np.where(emitted >= 1, out[np.arange(out.shape[0]), np.maximum(emitted - 1, 0)], vocab)
    no_final = (emitted == gamma) & np.all(out[:, :gamma] == ids, axis=1)
    k = np.where(no_final, gamma, k)
    y = np.where(no_final, vocab, y)
    cells = (group * (gamma + 1) + k) * (vocab + 1) + y
    return np.bincount(cells, minlength=batch * (gamma + 1) * (vocab + 1)).astype(float)


def expected_cells(group, ids, dq, tp, batch):
    law = path_step_law(ids, dq, tp)  # [N, g+1, V]
    n, g1, vocab = law.shape
    padded = np.concatenate([law, np.zeros((n, g1, 1))], axis=2)
    out = np.zeros((batch, g1, vocab + 1))
    np.add.at(out, group, padded)
    return out.reshape(-1)


def g_test(observed, expected, alpha=ALPHA):
    """G-test on cells with expected >= MIN_EXPECTED, the rest pooled; any count in a zero cell rejects.

    Returns (rejected, detail). Under H0 the G statistic is asymptotically chi-square, so the
    false-alarm probability is alpha (plus the asymptotic error, negligible at >= 20 per cell).
    """
    impossible = (expected <= 0) & (observed > 0)
    if impossible.any():
        return True, f"{int(observed[impossible].sum())} draws in impossible cells"
    big = expected >= MIN_EXPECTED
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    with np.errstate(divide="ignore", invalid="ignore"):
        g = 2.0 * np.sum(np.where(obs > 0, obs * np.log(obs / exp), 0.0))
    df = obs.size - 1
    critical = stats.chi2.isf(alpha, df)
    return bool(g > critical), f"G={g:.1f}, df={df}, critical={critical:.1f}"


def first_token_cells(out, group, batch, vocab):
    cells = group * vocab + out[:, 0]
    return np.bincount(cells, minlength=batch * vocab).astype(float)
