"""numpy_verify throughput against plain vectorized categorical sampling of the same rows.

    python benchmarks/bench_verify.py [--rows 100000] [--vocab 32] [--gamma 4] [--repeats 5]

Prints emitted tokens per second of both and their ratio, measured in the same run (absolute
times on shared machines drift; the ratio is the number to read). "Plain categorical" draws one
token from every one of the B x (gamma+1) target rows by inverse CDF.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from specdec_check.samplers import numpy_verify


def inverse_cdf_all_rows(target_probs, generator):
    rows = target_probs.reshape(-1, target_probs.shape[-1])
    cdf = np.cumsum(rows, axis=1)
    return (cdf <= generator.random((rows.shape[0], 1)) * cdf[:, -1:]).sum(axis=1)


def best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def measure(rows=100_000, vocab=32, gamma=4, repeats=5, seed=0):
    rng = np.random.default_rng(seed)
    target = rng.random((rows, gamma + 1, vocab)) ** 2
    target /= target.sum(-1, keepdims=True)
    draft = 0.5 * target[:, :gamma] + 0.5 * rng.dirichlet(np.ones(vocab), size=(rows, gamma))
    ids = (np.cumsum(draft, -1) < rng.random((rows, gamma, 1))).sum(-1)
    gen = np.random.default_rng(seed + 1)
    t_verify, out = best_of(lambda: numpy_verify(draft_token_ids=ids, draft_probs=draft, target_probs=target,
                                                 generator=gen), repeats)
    t_plain, plain = best_of(lambda: inverse_cdf_all_rows(target, gen), repeats)
    verify_tps = (out >= 0).sum() / t_verify
    plain_tps = plain.size / t_plain
    return {"rows": rows, "vocab": vocab, "gamma": gamma, "verify_tokens_per_s": verify_tps,
            "categorical_tokens_per_s": plain_tps, "ratio": verify_tps / plain_tps}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--vocab", type=int, default=32)
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    r = measure(args.rows, args.vocab, args.gamma, args.repeats)
    print(f"B={r['rows']:,} V={r['vocab']} gamma={r['gamma']}: numpy_verify {r['verify_tokens_per_s']:,.0f} tokens/s, "
          f"plain categorical {r['categorical_tokens_per_s']:,.0f} tokens/s, ratio {r['ratio']:.2f}x (target >= 0.8x)")


if __name__ == "__main__":
    main()
