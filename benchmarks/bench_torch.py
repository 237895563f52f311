"""Throughput of the torch reference verifier next to the numpy reference (same shapes, same rows).

Not a test: prints a table. Throughput is emitted tokens per second (accepted drafts plus
the final token, summed over rows) and rows (verify steps) per second; "ratio" is
torch / numpy. Each entry is the best of ``--repeats`` timed calls after one warm-up call;
CUDA timings synchronise before and after each call.

    python benchmarks/bench_torch.py                         # CPU float32, B=100000, V in {32, 1000}, gamma in {1, 4}
    python benchmarks/bench_torch.py --device cuda --dtype bfloat16 --out results.txt
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from specdec_check.samplers import numpy_verify, torch_verify


def _rows(rng, batch, gamma, vocab):
    p = rng.random((batch, gamma + 1, vocab)) ** 3
    p /= p.sum(-1, keepdims=True)
    q = rng.random((batch, gamma, vocab)) ** 3
    q /= q.sum(-1, keepdims=True)
    cdf = np.cumsum(q, -1)
    ids = (cdf < rng.random((batch, gamma, 1))).sum(-1).clip(max=vocab - 1)
    return ids.astype(np.int64), q, p


def _best(fn, repeats, sync):
    fn()  # warm-up
    best, out = float("inf"), None
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        out = fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return best, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--vocab", type=int, nargs="+", default=[32, 1000])
    ap.add_argument("--gamma", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "float64"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--skip-numpy", action="store_true")
    ap.add_argument("--out", default=None, help="also append the table to this file")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    lines = [f"torch {torch.__version__}  device={device}  dtype={args.dtype}  torch threads={torch.get_num_threads()}  "
             f"B={args.batch}  repeats={args.repeats}",
             f"{'V':>6} {'gamma':>5} | {'numpy tok/s':>12} {'torch tok/s':>12} {'ratio':>7} | "
             f"{'numpy rows/s':>12} {'torch rows/s':>12}"]
    print(lines[0], flush=True)
    print(lines[1], flush=True)
    rng = np.random.default_rng(0)
    for vocab in args.vocab:
        for gamma in args.gamma:
            ids, q, p = _rows(rng, args.batch, gamma, vocab)
            if args.skip_numpy:
                t_np, tok_np = float("nan"), float("nan")
            else:
                gen_np = np.random.default_rng(1)
                t_np, out_np = _best(lambda: numpy_verify(draft_token_ids=ids, draft_probs=q, target_probs=p,
                                                          generator=gen_np), args.repeats, lambda: None)
                tok_np = float((out_np >= 0).sum())
            kw = dict(draft_token_ids=torch.from_numpy(ids).to(device),
                      draft_probs=torch.from_numpy(q).to(dtype).to(device),
                      target_probs=torch.from_numpy(p).to(dtype).to(device))
            del q, p
            gen = torch.Generator(device=device).manual_seed(1)
            t_t, out_t = _best(lambda: torch_verify(**kw, generator=gen), args.repeats, sync)
            tok_t = float((out_t >= 0).sum().item())
            del kw, out_t
            np_tps = tok_np / t_np
            line = (f"{vocab:>6} {gamma:>5} | {np_tps:>12.3e} {tok_t / t_t:>12.3e} {(tok_t / t_t) / np_tps:>6.2f}x | "
                    f"{args.batch / t_np:>12.3e} {args.batch / t_t:>12.3e}")
            lines.append(line)
            print(line, flush=True)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
