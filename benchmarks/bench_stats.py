"""Timings of the statistics engine (not a test).  Run: python benchmarks/bench_stats.py"""
import time

import numpy as np


def _time(label, fn, repeat=3):
    best = cpu_best = float("inf")
    first = None
    for i in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        dt, dc = time.perf_counter() - t, time.process_time() - c
        first = dt if first is None else first
        best, cpu_best = min(best, dt), min(cpu_best, dc)
    print(f"{label:<62s} first {first * 1e3:8.1f} ms  best {best * 1e3:8.1f} ms  (cpu {cpu_best * 1e3:8.1f} ms)")
    return out


def main():
    from specdec_check.stats import (
        SequentialIdentityTest,
        identity_test,
        pit_test,
        poisson_binomial_test,
        samples_for,
    )
    from specdec_check.stats import _lattice

    rng = np.random.default_rng(1234)
    k, n = 10**6, 10**7
    probs = np.arange(1, k + 1, dtype=float) ** -1.1
    probs /= probs.sum()
    counts = rng.multinomial(n, probs)

    def cold():
        _lattice._CACHE.clear()
        return identity_test(counts, probs, alpha=1e-10)

    r = _time("identity_test k=1e6 cells, n=1e7 counts (cold cache)", cold)
    _time("identity_test k=1e6 cells, n=1e7 counts (warm cache)", lambda: identity_test(counts, probs, alpha=1e-10))
    print(f"    -> pvalue={r.pvalue:.3g}, bins={r.bins}")

    p64 = 1 / np.arange(1, 65)
    p64 /= p64.sum()
    c64 = rng.multinomial(100_000, p64)

    def cold64():
        _lattice._CACHE.clear()
        return identity_test(c64, p64, alpha=1e-10)

    _time("identity_test k=64, n=1e5 (cold cache)", cold64)
    _time("identity_test k=64, n=1e5 (warm cache)", lambda: identity_test(c64, p64, alpha=1e-10), repeat=20)

    V, m, ns = 32, 1000, 10**6
    table = rng.dirichlet(np.ones(V), size=m)
    idx = rng.integers(0, m, ns)
    x = (rng.random(ns)[:, None] > np.cumsum(table[idx], axis=1)).sum(axis=1).clip(max=V - 1)
    _time("pit_test 1e6 samples, V=32, row_index into 1000 rows", lambda: pit_test(x, table, alpha=1e-10, rng=1, row_index=idx))
    full = table[idx]
    _time("pit_test 1e6 samples, V=32, full [n, V] rows", lambda: pit_test(x, full, alpha=1e-10, rng=1), repeat=1)

    sp = rng.random(10**6)
    _time("poisson_binomial_test 1e6 probabilities", lambda: poisson_binomial_test(int(sp.sum()), sp, alpha=1e-10), repeat=1)
    _time("samples_for(0.02, k=1e6 Zipf probs, alpha=1e-10)", lambda: samples_for(0.02, probs=probs, alpha=1e-10), repeat=1)

    def seq():
        st = SequentialIdentityTest(p64, alpha=1e-10)
        for _ in range(100):
            st.update(rng.multinomial(1000, p64))
        return st

    _time("SequentialIdentityTest k=64, 100 updates", seq, repeat=1)


if __name__ == "__main__":
    main()
