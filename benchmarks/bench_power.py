"""Size, power, TV-bound, planning and timing tables of the identity test (not a test).

Run:  python benchmarks/bench_power.py [--sections size,power,tv,plan,timing] [--quick]

Every number is measured in this run with fixed seeds.  The script only uses the
public API that existed before issue 19 (plus, where present, the new keyword
arguments), so running it with ``PYTHONPATH`` pointing at an older checkout gives
the "before" column of the same tables.

* size:   false-alarm rate over 10^4 null runs per family at alpha 1e-2 and 1e-3
          (bound: nominal + 3 standard errors);
* power:  rejection rate at ``samples_for(eps)``'s n against five alternatives at
          TV = eps (concentrated, two halves, random signs, signs alternating between
          neighbouring cells -- i.e. inside any bin of consecutive cells --, tail);
* tv:     median and coverage of the certified TV bound (delta = 0.05), both radii;
* plan:   samples_for at a grid of (k, eps, alpha), by calibration route;
* timing: identity_test (cold / warm cache) and SequentialIdentityTest.update.
"""
from __future__ import annotations

import argparse
import inspect
import time

import numpy as np

from specdec_check import stats
from specdec_check.stats import _lattice

NEW = hasattr(stats, "detectability")


def zipf(k, s=1.1):
    p = np.arange(1, k + 1, dtype=float) ** -s
    return p / p.sum()


def uniform(k):
    return np.full(k, 1.0 / k)


def heavy_plus_tiny(tiny=10_000):
    return np.r_[0.5, 0.3, 0.17, np.full(tiny, 0.03 / tiny)]


def counts_rows(rng, n, q, runs):
    """Multinomial rows; categorical draws + bincount when n is small next to k."""
    k = len(q)
    out = np.empty((runs, k), dtype=np.int64)
    step = max(1, (1 << 22) // max(k, n))
    cdf = np.cumsum(q)
    for r in range(0, runs, step):
        m = min(step, runs - r)
        if n < k:
            x = np.minimum(np.searchsorted(cdf, rng.random((m, n)) * cdf[-1], side="right"), k - 1)
            out[r:r + m] = np.bincount((x + (np.arange(m) * k)[:, None]).ravel(), minlength=m * k).reshape(m, k)
        else:
            out[r:r + m] = rng.multinomial(n, q, size=m)
    return out


def table(header, rows):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "| " + " | ".join(str(c).rjust(w) for c, w in zip(cells, widths)) + " |"
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))
    print()


# ------------------------------------------------------------------------------------------------
def section_size(runs):
    fams = [("uniform k=2", uniform(2), 20), ("uniform k=100", uniform(100), 100),
            ("uniform k=1000", uniform(1000), 3000), ("uniform k=10^4", uniform(10_000), 20_000),
            ("Zipf 1.1 k=1000", zipf(1000), 5000), ("Zipf 1.1 k=1000 n=20", zipf(1000), 20),
            ("Dirichlet(0.1) k=500", np.random.default_rng(1234).dirichlet(np.full(500, 0.1)), 100_000),
            ("3 heavy + 10^4 tiny", heavy_plus_tiny(), 2000)]
    rows = []
    for name, p, n in fams:
        rng = np.random.default_rng(1234)
        t = time.perf_counter()
        pv = stats.identity_pvalues(counts_rows(rng, n, p, runs), p)
        rows.append([name, n, f"{(pv <= 1e-2).mean():.4f}", f"{(pv <= 1e-3).mean():.5f}",
                     f"{1e-2 + 3 * np.sqrt(1e-2 * 0.99 / runs):.4f} / {1e-3 + 3 * np.sqrt(1e-3 * 0.999 / runs):.5f}",
                     f"{time.perf_counter() - t:.1f}"])
    print(f"### Size: false-alarm rate over {runs} null runs (fixed n)\n")
    table(["family", "n", "rate @1e-2", "rate @1e-3", "bound (nominal + 3 SE)", "s"], rows)


# ------------------------------------------------------------------------------------------------
def alternatives(p, eps, rng):
    """Five alternatives at TV = eps (cells sorted by p; all renormalised)."""
    o = np.argsort(-p, kind="stable")
    ps = p[o]
    out = {}
    q = ps.copy()
    q[0] -= eps
    q[1] += eps
    out["concentrated"] = q
    cum = np.cumsum(ps)
    sign = np.where(cum - ps / 2 < 0.5, 1.0, -1.0)
    out["two halves"] = ps * (1 + 2 * eps * sign)
    out["random signs"] = ps * (1 + 2 * eps * rng.choice([-1.0, 1.0], size=len(ps)))
    out["alternating"] = ps * (1 + 2 * eps * np.where(np.arange(len(ps)) % 2 == 0, 1.0, -1.0))
    tail = np.zeros(len(ps), dtype=bool)  # lightest cells holding >= 10% of the mass (and >= 10% of cells)
    ntail = max(int(np.searchsorted(np.cumsum(ps[::-1]), 0.1)) + 1, len(ps) // 10)
    tail[len(ps) - ntail:] = True
    mt = ps[tail].sum()
    out["tail"] = np.where(tail, ps * (1 + eps / mt), ps * (1 - eps / (1 - mt)))
    res = {}
    for name, q in out.items():
        q = np.maximum(q, 0)
        q /= q.sum()
        full = np.empty_like(q)
        full[o] = q
        res[name] = (full, 0.5 * np.abs(full - p).sum())
    return res


def section_power(runs, ks):
    alpha, eps, power = 1e-3, 0.05, 0.99
    laws = [(f"uniform k={k:g}", uniform(k)) for k in ks] + [("Zipf 1.1 k=1000", zipf(1000)),
                                                             ("Zipf 1.1 k=10^4", zipf(10_000))]
    rows = []
    for name, p in laws:
        t = time.perf_counter()
        kw = {"probs": p} if not name.startswith("uniform") else {"support_size": len(p)}
        n = stats.samples_for(eps, alpha=alpha, power=power, **kw)
        rng = np.random.default_rng(1234)
        r = max(100, runs // 2) if len(p) >= 10 ** 5 else runs
        cells = []
        for alt, (q, tv) in alternatives(p, eps, rng).items():
            pv = stats.identity_pvalues(counts_rows(rng, n, q, r), p)
            note = "" if abs(tv - eps) < 0.01 * eps else f" (TV {tv:.3f})"  # sign imbalance / clipping
            cells.append(f"{(pv <= alpha).mean():.3f}{note}")
        rows.append([name, f"{n:,}", *cells, r, f"{time.perf_counter() - t:.0f}"])
    print(f"### Power at samples_for(eps={eps}, alpha={alpha}, power={power}) -- rejection rate, TV = {eps}\n")
    table(["law", "n = samples_for", "concentrated", "two halves", "random signs", "alternating", "tail", "runs", "s"], rows)


# ------------------------------------------------------------------------------------------------
def section_tv(runs):
    delta = 0.05
    rng = np.random.default_rng(1234)
    k = 10_000
    pu = uniform(k)
    qu = pu * (1 + 0.2 * rng.choice([-1.0, 1.0], size=k))
    qu /= qu.sum()
    cases = [("3 heavy + 10^4 tiny, null", heavy_plus_tiny(), heavy_plus_tiny(), 2000),
             ("3 heavy + 10^4 tiny, tail lost", heavy_plus_tiny(), np.r_[0.5, 0.3, 0.2, np.zeros(10_000)], 2000),
             ("uniform 10^4, TV 0.1", pu, qu, 20_000),
             ("Zipf 1.1 k=1000, null", zipf(1000), zipf(1000), 5000)]
    rows = []
    for name, p, q, n in cases:
        true_tv = 0.5 * np.abs(q - p).sum()
        c = counts_rows(rng, n, q, runs)
        plug = 0.5 * np.abs(c / n - p).sum(axis=1)
        old = np.minimum(1, plug + stats.tv_deviation_radius(n, len(p), delta))
        new = np.array([stats.tv_upper_bound(ci, p, delta=delta) for ci in c[: min(runs, 200)]])
        mc = np.minimum(1, plug + np.sqrt(np.log(1 / delta) / (2 * n)))
        rows.append([name, n, f"{true_tv:.3f}", f"{np.median(old):.3f}", f"{(old >= true_tv).mean():.3f}",
                     f"{np.median(mc):.3f}", f"{(mc >= true_tv).mean():.3f}", f"{np.median(new):.3f}"])
    print(f"### Certified TV upper bound, delta = {delta}, {runs} runs (median, coverage)\n")
    table(["case", "n", "true TV", "median: + deviation radius (old)", "coverage", "median: + sqrt(ln(1/d)/2n) (new)",
           "coverage", "median tv_upper_bound"], rows)


# ------------------------------------------------------------------------------------------------
def section_plan():
    rows = []
    for k in (16, 64, 1000, 10_000, 100_000):
        for eps in (0.05, 0.15):
            for alpha in (1e-3, 1e-10):
                t = time.perf_counter()
                n = stats.samples_for(eps, support_size=k, alpha=alpha)
                cells = [f"{n:,}"]
                if NEW:
                    d = stats.detectability(n, support_size=k, alpha=alpha)
                    pen = stats.samples_for(eps, support_size=k, alpha=alpha, conditional=False)
                    poi = stats.samples_for(eps, support_size=k, alpha=alpha, sampling="poisson")
                    cells += [d.route, f"{pen:,}", f"{100 * (n / pen - 1):+.1f}%", f"{poi:,}", f"{100 * (poi / pen - 1):+.1f}%"]
                rows.append([k, eps, f"{alpha:g}", *cells, f"{time.perf_counter() - t:.1f}"])
    print("### samples_for (support_size = k, power 0.99)\n")
    head = ["k", "eps", "alpha", "n"]
    if NEW:
        head += ["route", "penalized (1/P(T=n))", "change", "Poissonized n", "change"]
    table(head + ["s"], rows)


# ------------------------------------------------------------------------------------------------
def _clear():
    for name in ("_CACHE", "_SUPPORT_CACHE"):
        if hasattr(_lattice, name):
            getattr(_lattice, name).clear()


def section_timing(repeat=3):
    rows = []
    rng = np.random.default_rng(1234)
    for k in (32, 1000, 32_000):
        for lname, p in (("uniform", uniform(k)), ("Zipf 1.1", zipf(k))):
            for n in (2000, 20_000, 200_000):
                c = rng.multinomial(n, p)
                cold, warm = [], []
                for _ in range(repeat):
                    _clear()
                    t = time.perf_counter()
                    r = stats.identity_test(c, p, alpha=1e-10)
                    cold.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    stats.identity_test(c, p, alpha=1e-10)
                    warm.append(time.perf_counter() - t)
                st = stats.SequentialIdentityTest(p, alpha=1e-10)
                ups, seen = [], 0
                while seen < n:  # the checker's schedule: an update after every 1/8 growth
                    m = max(256, seen // 8)
                    b = rng.multinomial(m, p)
                    t = time.perf_counter()
                    st.update(b)
                    ups.append(time.perf_counter() - t)
                    seen += m
                rows.append([k, lname, n, r.bins, getattr(r, "calibration", "-"), f"{1e3 * min(cold):.1f}",
                             f"{1e3 * min(warm):.1f}", len(ups), f"{1e3 * np.mean(ups):.2f}", f"{1e3 * np.sum(ups):.0f}"])
    print("### Timing (ms): identity_test at alpha 1e-10; e-process updated after every 1/8 growth up to n\n")
    table(["k", "law", "n", "bins", "route", "identity cold", "identity warm", "updates", "update mean", "updates total"], rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", default="size,power,tv,plan,timing")
    ap.add_argument("--quick", action="store_true", help="fewer runs and no k = 10^5")
    args = ap.parse_args()
    sections = args.sections.split(",")
    print(f"specdec_check.stats from {inspect.getfile(stats)}\n")
    if "size" in sections:
        section_size(2000 if args.quick else 10_000)
    if "power" in sections:
        section_power(100 if args.quick else 300, (100, 1000, 10_000) if args.quick else (100, 1000, 10_000, 100_000))
    if "tv" in sections:
        section_tv(300 if args.quick else 1000)
    if "plan" in sections:
        section_plan()
    if "timing" in sections:
        section_timing()


if __name__ == "__main__":
    main()
