"""Report figures as PNG bytes (matplotlib, Agg canvas), or ``None`` without matplotlib.

Uses the object-oriented API (``Figure`` + ``FigureCanvasAgg``): no pyplot, no global
backend switch, nothing shown. PNG metadata is pinned so the bytes are reproducible.

Matplotlib lays text out at roughly half a millisecond per character, so every name drawn
(scenario, check, bin label) is cut to a few dozen characters by :func:`_label`, which also
escapes control characters and ``$`` (mathtext); and the number of curves, legend
entries, rows and figures is capped. A report of any size draws in bounded time.
"""

from __future__ import annotations

import io
import math
import warnings
from statistics import NormalDist

import numpy as np

__all__ = [
    "LABEL_LIMIT",
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
#: Longest name drawn in a figure (titles, legends, tick labels); the tables keep the whole name.
LABEL_LIMIT = 48
#: Colours of a passed and a rejected test in the evidence figure.
_PASSED, _REJECTED = "#2e7d32", "#c0392b"
#: At most this many scenarios per efficiency or speedup figure (one legend entry each).
MAX_SCENARIO_CURVES = 24
#: At most this many Equation 1 curves (distinct γ) in the efficiency figure.
MAX_GAMMA_CURVES = 8
#: At most this many checks (rows) in the p-value overview.
MAX_CHECK_ROWS = 40
#: At most this many law figures (one per check; checks with a rejected test first).
MAX_LAW_FIGURES = 16
#: Simultaneous coverage of the per-bin intervals (Bonferroni over the bins shown).
CI_LEVEL = 0.99


def _label(value, limit: int = LABEL_LIMIT) -> str:
    """A name as drawn: one line, control characters escaped, ``$`` literal, at most ``limit`` characters."""
    from .._escape import one_line

    text = one_line(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("$", r"\$")


def _clip_name(value) -> str:
    """A name for an HTML figure title (escaped by the page, so ``$`` stays as it is)."""
    from .._escape import clip, one_line

    return clip(one_line(value), 120)


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
    else:
        rows_obs = observed.reshape(-1, observed.shape[-1])
        rows_exp = expected.reshape(-1, expected.shape[-1])
    row_sums = rows_exp.sum(axis=1)
    if rows_obs.shape[0] > 1 and np.allclose(row_sums[row_sums > 0], 1.0, atol=1e-6):
        n = np.repeat(rows_obs.sum(axis=1, keepdims=True), rows_obs.shape[1], axis=1)
    else:
        n = np.full_like(rows_obs, rows_obs.sum())
        if rows_exp.sum() > 0:
            rows_exp = rows_exp / rows_exp.sum()
    obs, exp, n = rows_obs.ravel(), rows_exp.ravel(), n.ravel()
    total = obs.size
    keep = np.arange(total)
    if total > MAX_BINS:
        score = exp + obs / np.maximum(n, 1)
        keep = np.sort(np.argsort(-score, kind="stable")[:MAX_BINS])
    labels = _bin_labels(details.get("labels"), observed.shape, keep)
    z = NormalDist().inv_cdf(1 - (1 - CI_LEVEL) / (2 * keep.size))
    freq = obs[keep] / np.maximum(n[keep], 1)
    lower, upper = _wilson(obs[keep], n[keep], z)
    return labels, exp[keep], freq, lower, upper, total


def _bin_labels(custom, shape, keep) -> list[str]:
    """Labels of the kept bins: the report's own (cut short) or the bin's index (``"i"`` or ``"i,j"``)."""
    total = int(np.prod(shape))
    if isinstance(custom, list):
        try:
            flat = np.asarray(custom, dtype=object).ravel()
        except ValueError:  # ragged
            flat = None
        if flat is not None and flat.size == total:
            return [_label(flat[i], 16) for i in keep]
    if len(shape) == 1:
        return [str(int(i)) for i in keep]
    return [",".join(str(int(j)) for j in np.unravel_index(int(i), shape)) for i in keep]


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
    title = (f"{_label(record.get('scenario'))}{shown}" if small
             else f"{_label(record.get('scenario'))} / {_label(record.get('check'))}{shown}")
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
    fig.suptitle(f"{_label(records[0].get('check'))}: exact law (bars) against empirical frequencies "
                 f"(simultaneous {CI_LEVEL:.0%} Wilson intervals)", fontsize=9)
    return _png(fig)


def _finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def efficiency_png(scenarios: list) -> bytes | None:
    """Tokens per step against the acceptance rate: Equation 1 curves, measured and exact points."""
    from ..exact import expected_tokens_per_step

    points = [s for s in scenarios if _finite(s.get("acceptance_measured")) and _finite(s.get("tokens_per_step_measured"))
              and isinstance(s.get("gamma"), int)][:MAX_SCENARIO_CURVES]
    if not points:
        return None
    fig = _figure()
    if fig is None:
        return None
    ax = fig.add_subplot()
    grid = np.linspace(0.0, 1.0, 201)
    colors = _colors(len(points))
    for gamma in sorted({int(s["gamma"]) for s in points})[:MAX_GAMMA_CURVES]:
        ax.plot(grid, [expected_tokens_per_step(a, gamma) for a in grid], color="#999999", lw=1, ls="--")
        ax.annotate(f"Eq. 1, γ={gamma}", (1.0, gamma + 1), fontsize=7, ha="right", va="bottom", color="#666666")
    for color, s in zip(colors, points):
        ax.plot(s["acceptance_measured"], s["tokens_per_step_measured"], "o", color=color,
                label=f"{_label(s.get('name'))} (measured)")
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

    points = [s for s in scenarios if _finite(s.get("acceptance_measured")) and 0 <= s["acceptance_measured"] <= 1
              and isinstance(s.get("gamma"), int)][:MAX_SCENARIO_CURVES]
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
                label=f"{_label(s.get('name'))} (α={alpha:.3f}, γ={gamma})")
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
    """-log10 p (circles) and log10 e (squares) of every test, one row per check, against the threshold.

    At most :data:`MAX_CHECK_ROWS` checks are drawn (checks with a rejected test first, then
    in report order); the points are drawn in four vectorised calls, whatever their number.
    """
    rows = [r for r in results if _finite(r.get("pvalue")) or _finite(r.get("evalue"))]
    if not rows:
        return None
    checks = list(dict.fromkeys(str(r.get("check")) for r in rows))
    if len(checks) > MAX_CHECK_ROWS:
        rejected = {str(r.get("check")) for r in rows if not r.get("passed", True)}
        chosen = set([c for c in checks if c in rejected][:MAX_CHECK_ROWS])
        chosen.update([c for c in checks if c not in chosen][: MAX_CHECK_ROWS - len(chosen)])
        checks = [c for c in checks if c in chosen]
    labels = [_label(c) for c in checks]
    width = 7.0
    fig = _figure(width=width, height=max(2.2, 0.32 * len(checks) + 1.2),
                  left=0.3 + 0.07 * max(len(c) for c in labels))
    if fig is None:
        return None
    ax = fig.add_subplot()
    ypos = {c: len(checks) - 1 - i for i, c in enumerate(checks)}
    offsets = {}
    points = {}  # (marker, color) -> ([x], [y])
    for r in rows:
        check = str(r.get("check"))
        if check not in ypos:
            continue
        k = offsets.get(check, 0)
        offsets[check] = k + 1
        yi = ypos[check] + ((k % 5) - 2) * 0.08  # a little jitter between scenarios
        color = _PASSED if r.get("passed", True) else _REJECTED
        if _finite(r.get("pvalue")):
            xs, ys = points.setdefault(("o", color), ([], []))
            xs.append(-math.log10(max(r["pvalue"], 1e-300)))
            ys.append(yi)
        if _finite(r.get("evalue")) and r["evalue"] > 0:
            xs, ys = points.setdefault(("s", color), ([], []))
            xs.append(math.log10(max(r["evalue"], 1e-300)))
            ys.append(yi)
    for (marker, color), (xs, ys) in points.items():  # every colour and marker drawn has its legend entry
        label = (f"{'rejected (a finding, or a warning in a passed report)' if color == _REJECTED else 'passed'}, "
                 f"{'p-value' if marker == 'o' else 'e-value'}")
        ax.plot(xs, ys, marker, color=color, ms=4, alpha=0.8, label=label,
                **({"mfc": "none"} if marker == "s" else {}))
    if _finite(alpha_per_check) and 0 < alpha_per_check < 1:
        ax.axvline(-math.log10(alpha_per_check), color=_REJECTED, ls="--", lw=1,
                   label=f"rejection: p < {alpha_per_check:.2g} or e > {1 / alpha_per_check:.2g}")
    ax.legend(fontsize=7, loc="lower right")
    ax.set_yticks([ypos[c] for c in checks])
    ax.set_yticklabels(labels, fontsize=8)
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
    if len(by_check) > MAX_LAW_FIGURES:  # checks with a rejected test first, then in report order
        order = sorted(by_check, key=lambda c: all(r.get("passed", True) for r in by_check[c]))
        by_check = {c: by_check[c] for c in order[:MAX_LAW_FIGURES]}
    for check, records in by_check.items():
        n = len(records)
        more = f" (the first {MAX_PANELS} of {n} scenarios, rejected ones first)" if n > MAX_PANELS else ""
        jobs.append((
            f"{_clip_name(check)}: exact against empirical law",
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
