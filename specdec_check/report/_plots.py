"""Report figures as PNG bytes (matplotlib, Agg canvas), or ``None`` without matplotlib.

Uses the object-oriented API (``Figure`` + ``FigureCanvasAgg``): no pyplot, no global
backend switch, nothing shown. PNG metadata is pinned so the bytes are reproducible.
"""

from __future__ import annotations

import io
import math
import warnings
from statistics import NormalDist

import numpy as np

__all__ = [
    "MAX_BINS",
    "available",
    "efficiency_png",
    "law_data",
    "law_grid_png",
    "law_png",
    "pvalue_png",
    "report_figures",
    "speedup_png",
]

#: At most this many bins per law plot (the most probable ones are kept).
MAX_BINS = 60
#: Simultaneous coverage of the per-bin intervals (Bonferroni over the bins shown).
CI_LEVEL = 0.99


def available() -> bool:
    """Whether matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figure(width=7.0, height=3.6, *, left=0.7, right=0.2, bottom=0.55, top=0.4, hspace=0.0, wspace=0.0):
    """A figure with fixed margins in inches (no tight bbox: one draw per figure, reproducible size)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        hspace=hspace, wspace=wspace)
    return fig


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _wilson(counts, n, z):
    counts = np.asarray(counts, dtype=float)
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    phat = counts / n
    denom = 1.0 + z * z / n
    centre = (phat + z * z / (2 * n)) / denom
    half = z * np.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denom
    return np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)


def law_data(details: dict):
    """(labels, expected, frequency, lower, upper, total_bins) from ``details`` or ``None``.

    ``details["observed"]`` are counts and ``details["expected"]`` probabilities of the same
    shape. A 1-D law is normalised by its total; for nested arrays whose last-axis rows each
    sum to one (conditional laws), each row is normalised by its own count.
    """
    try:
        observed = np.asarray(details.get("observed"), dtype=float)
        expected = np.asarray(details.get("expected"), dtype=float)
    except (TypeError, ValueError):
        return None
    if observed.shape != expected.shape or observed.size == 0 or not np.all(np.isfinite(expected)):
        return None
    if not np.all(np.isfinite(observed)) or observed.min() < 0:
        return None
    if observed.ndim == 1:
        rows_obs, rows_exp = observed[None, :], expected[None, :]
        labels = [str(i) for i in range(observed.size)]
    else:
        rows_obs = observed.reshape(-1, observed.shape[-1])
        rows_exp = expected.reshape(-1, expected.shape[-1])
        index = np.ndindex(*observed.shape)
        labels = [",".join(str(i) for i in idx) for idx in index]
    row_sums = rows_exp.sum(axis=1)
    if rows_obs.shape[0] > 1 and np.allclose(row_sums[row_sums > 0], 1.0, atol=1e-6):
        n = np.repeat(rows_obs.sum(axis=1, keepdims=True), rows_obs.shape[1], axis=1)
    else:
        n = np.full_like(rows_obs, rows_obs.sum())
        if rows_exp.sum() > 0:
            rows_exp = rows_exp / rows_exp.sum()
    obs, exp, n = rows_obs.ravel(), rows_exp.ravel(), n.ravel()
    if custom := details.get("labels"):
        flat = np.asarray(custom, dtype=object).ravel()
        if flat.size == obs.size:
            labels = [str(x) for x in flat]
    total = obs.size
    keep = np.arange(total)
    if total > MAX_BINS:
        score = exp + obs / np.maximum(n, 1)
        keep = np.sort(np.argsort(-score, kind="stable")[:MAX_BINS])
    z = NormalDist().inv_cdf(1 - (1 - CI_LEVEL) / (2 * keep.size))
    freq = obs[keep] / np.maximum(n[keep], 1)
    lower, upper = _wilson(obs[keep], n[keep], z)
    return [labels[i] for i in keep], exp[keep], freq, lower, upper, total


def _law_axes(ax, record, law, *, small=False):
    labels, expected, freq, lower, upper, total = law
    x = np.arange(len(labels))
    ax.bar(x, expected, color="#c9d7ea", edgecolor="#6b8cba", linewidth=0.5, label="exact law")
    ax.vlines(x, np.minimum(lower, freq), np.maximum(upper, freq), color="#1f3b63", lw=0.8)
    ax.plot(x, freq, "o", ms=2 if small else 3, color="#1f3b63", label=f"empirical, simultaneous {CI_LEVEL:.0%} CI")
    bad = (expected < lower - 1e-12) | (expected > upper + 1e-12)
    if bad.any():
        ax.plot(x[bad], freq[bad], "o", ms=4, color="#c0392b", label="interval misses the exact value")
    if len(labels) <= (16 if small else 40):
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=90 if len(labels) > 12 else 0, fontsize=6 if small else 7)
    else:
        ax.set_xticks([])
        ax.set_xlabel(f"{len(labels)} bins", fontsize=6 if small else 8)
    ax.tick_params(labelsize=6 if small else 8)
    shown = "" if total == len(labels) else f" ({len(labels)}/{total} bins)"
    failed = not record.get("passed", True)
    title = (f"{record.get('scenario')}{shown}" if small
             else f"{record.get('scenario')} / {record.get('check')}{shown}")
    ax.set_title(("REJECTED: " if failed else "") + title, fontsize=7 if small else 9,
                 color="#c0392b" if failed else "black")


def law_png(record: dict) -> bytes | None:
    """Exact probabilities (bars) against empirical frequencies with simultaneous Wilson intervals."""
    law = law_data(record.get("details") or {})
    if law is None:
        return None
    fig = _figure(width=max(5.0, min(12.0, 0.22 * len(law[0]) + 3)), bottom=0.8)
    if fig is None:
        return None
    ax = fig.add_subplot()
    _law_axes(ax, record, law)
    ax.set_ylabel("probability")
    ax.legend(fontsize=7, loc="best")
    return _png(fig)


#: At most this many scenario panels per check figure (rejected tests first).
MAX_PANELS = 12


def law_grid_png(records: list) -> bytes | None:
    """Small multiples: one panel per scenario for one check (rejected tests first)."""
    laws = [(r, law_data(r.get("details") or {})) for r in records]
    laws = [(r, law) for r, law in laws if law is not None]
    if not laws:
        return None
    laws.sort(key=lambda item: bool(item[0].get("passed", True)))
    laws = laws[:MAX_PANELS]
    cols = min(3, len(laws))
    rows = math.ceil(len(laws) / cols)
    fig = _figure(width=3.6 * cols + 0.4, height=2.4 * rows + 0.6, left=0.5, bottom=0.5, top=0.6,
                  hspace=0.75, wspace=0.3)
    if fig is None:
        return None
    for i, (record, law) in enumerate(laws):
        ax = fig.add_subplot(rows, cols, i + 1)
        _law_axes(ax, record, law, small=True)
        if i == 0:
            ax.legend(fontsize=5, loc="best")
    fig.suptitle(f"{records[0].get('check')}: exact law (bars) against empirical frequencies "
                 f"(simultaneous {CI_LEVEL:.0%} Wilson intervals)", fontsize=9)
    return _png(fig)


def _finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def efficiency_png(scenarios: list) -> bytes | None:
    """Tokens per step against the acceptance rate: Equation 1 curves, measured and exact points."""
    from ..exact import expected_tokens_per_step

    points = [s for s in scenarios if _finite(s.get("acceptance_measured")) and _finite(s.get("tokens_per_step_measured"))]
    if not points:
        return None
    fig = _figure()
    if fig is None:
        return None
    ax = fig.add_subplot()
    grid = np.linspace(0.0, 1.0, 201)
    colors = _colors(len(points))
    for gamma in sorted({int(s["gamma"]) for s in points}):
        ax.plot(grid, [expected_tokens_per_step(a, gamma) for a in grid], color="#999999", lw=1, ls="--")
        ax.annotate(f"Eq. 1, γ={gamma}", (1.0, gamma + 1), fontsize=7, ha="right", va="bottom", color="#666666")
    for color, s in zip(colors, points):
        ax.plot(s["acceptance_measured"], s["tokens_per_step_measured"], "o", color=color, label=f"{s['name']} (measured)")
        if _finite(s.get("acceptance_expected")) and _finite(s.get("tokens_per_step_expected")):
            ax.plot(s["acceptance_expected"], s["tokens_per_step_expected"], "x", ms=8, color=color)
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("acceptance rate α")
    ax.set_ylabel("tokens per step")
    ax.set_title("Tokens per step: measured (o), exact (x), Equation 1 (dashed)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    return _png(fig)


def speedup_png(scenarios: list) -> bytes | None:
    """Theorem 3.8's expected speedup against the cost ratio c, with the break-even point α = c."""
    from ..exact import expected_speedup

    points = [s for s in scenarios if _finite(s.get("acceptance_measured")) and 0 <= s["acceptance_measured"] <= 1]
    if not points:
        return None
    fig = _figure()
    if fig is None:
        return None
    ax = fig.add_subplot()
    grid = np.linspace(0.0, 1.0, 201)
    for color, s in zip(_colors(len(points)), points):
        alpha, gamma = float(s["acceptance_measured"]), int(s["gamma"])
        ax.plot(grid, [expected_speedup(alpha, gamma, c) for c in grid], color=color,
                label=f"{s['name']} (α={alpha:.3f}, γ={gamma})")
        ax.axvline(alpha, color=color, ls=":", lw=1)
    ax.axhline(1.0, color="#444444", lw=0.8)
    ax.plot([], [], color="#444444", ls=":", lw=1, label="break-even α = c (Cor. 3.9)")
    ax.set_xlim(0, 1)
    ax.set_xlabel("cost ratio c (draft step / target step)")
    ax.set_ylabel("expected speedup")
    ax.set_title("Speedup projection (Theorem 3.8) at the measured α", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    return _png(fig)


def pvalue_png(results: list, alpha_per_check) -> bytes | None:
    """-log10 p (circles) and log10 e (squares) of every test, one row per check, against the threshold."""
    rows = [r for r in results if _finite(r.get("pvalue")) or _finite(r.get("evalue"))]
    if not rows:
        return None
    checks = list(dict.fromkeys(str(r.get("check")) for r in rows))
    width = 7.0
    fig = _figure(width=width, height=max(2.2, 0.32 * len(checks) + 1.2),
                  left=0.3 + 0.07 * max(len(c) for c in checks))
    if fig is None:
        return None
    ax = fig.add_subplot()
    ypos = {c: len(checks) - 1 - i for i, c in enumerate(checks)}
    offsets = {}
    for r in rows:
        check = str(r.get("check"))
        k = offsets.get(check, 0)
        offsets[check] = k + 1
        yi = ypos[check] + ((k % 5) - 2) * 0.08  # a little jitter between scenarios
        color = "#2e7d32" if r.get("passed", True) else "#c0392b"
        if _finite(r.get("pvalue")):
            ax.plot(-math.log10(max(r["pvalue"], 1e-300)), yi, "o", color=color, ms=4, alpha=0.8)
        if _finite(r.get("evalue")) and r["evalue"] > 0:
            ax.plot(math.log10(max(r["evalue"], 1e-300)), yi, "s", color=color, ms=4, mfc="none", alpha=0.8)
    if _finite(alpha_per_check) and 0 < alpha_per_check < 1:
        ax.axvline(-math.log10(alpha_per_check), color="#c0392b", ls="--", lw=1,
                   label=f"rejection: p < {alpha_per_check:.2g} or e > {1 / alpha_per_check:.2g}")
        ax.legend(fontsize=7, loc="lower right")
    ax.set_yticks([ypos[c] for c in checks])
    ax.set_yticklabels(checks, fontsize=8)
    ax.set_ylim(-0.6, len(checks) - 0.4)
    ax.set_xlabel("−log10 p (o)   ·   log10 e (□)")
    ax.set_title("Evidence against exactness, every test (green passed, red rejected)", fontsize=9)
    return _png(fig)


def _colors(n):
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
    return [palette[i % len(palette)] for i in range(n)]


def report_figures(data: dict) -> list[tuple[str, str, bytes]]:
    """Every figure the report has data for, as (title, caption, PNG bytes); ``[]`` without matplotlib.

    A figure that fails to draw is left out with a warning: figures never stop a report.
    """
    if not available():
        return []
    scenarios = data.get("scenarios", [])
    results = data.get("results", [])
    jobs = [
        ("Tokens per step", "Measured and exact tokens per step against Equation 1, (1 − α^(γ+1)) / (1 − α).",
         lambda: efficiency_png(scenarios)),
        ("Speedup projection", "Theorem 3.8: (1 − α^(γ+1)) / ((1 − α)(γc + 1)) against the cost ratio c at the "
         "measured α; dotted lines mark the break-even point α = c of Corollary 3.9.", lambda: speedup_png(scenarios)),
        ("p-value / e-value overview", "Each test's evidence against exactness; points right of the dashed line "
         "are rejections.", lambda: pvalue_png(results, data.get("alpha_per_check"))),
    ]
    by_check: dict = {}
    for record in results:
        if law_data(record.get("details") or {}) is not None:
            by_check.setdefault(str(record.get("check")), []).append(record)
    for check, records in by_check.items():
        n = len(records)
        more = f" (the first {MAX_PANELS} of {n} scenarios, rejected ones first)" if n > MAX_PANELS else ""
        jobs.append((
            f"{check}: exact against empirical law",
            f"Exact law (bars) against the empirical frequencies (points) per scenario{more}; error bars are "
            f"simultaneous {CI_LEVEL:.0%} Wilson intervals over the bins of a panel.",
            lambda records=records: law_grid_png(records),
        ))
    figures = []
    for title, caption, draw in jobs:
        try:
            png = draw()
        except Exception as exc:  # pragma: no cover - defensive: a plotting bug must not lose the report
            warnings.warn(f"specdec-check: figure {title!r} left out: {type(exc).__name__}: {exc}", stacklevel=2)
            continue
        if png is not None:
            figures.append((title, caption, png))
    return figures
