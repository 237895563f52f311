"""Decode-loop bridges: rows per second of each adapter against the in-process reference, on one scenario.

Each bridge runs the same scenario (``hf-small-joint``: V = 5, 3 new tokens, 64 prompt rows a call) in quick mode,
seed 0, in this process; the table gives the verdict, the rows generated, the wall time and rows per second, and
the ratio to ``specdec_check.samplers.numpy_generate`` (the in-process reference loop). A loop of batch size 1
(transformers' assisted generation, gpt-fast, the classic single-sequence loops) runs the rows one by one: its
cost is the callee's, which this benchmark states, not hides::

    python benchmarks/bridge_speed.py                                  # reference and transformers
    SPECDEC_GPT_FAST_SRC=<gpt-fast checkout> SPECDEC_LLMSS_SRC=<LLMSpeculativeSampling checkout> \\
        python benchmarks/bridge_speed.py                              # and gpt-fast, feifeibear's loop

Measured numbers go to benchmarks/results.md by hand; nothing here is a test.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bridges():
    from specdec_check.adapters import from_classic_loop, from_gpt_fast_generate
    from specdec_check.adapters.hf import from_hf_generate
    from specdec_check.samplers import numpy_generate

    yield "numpy_generate (in-process reference)", numpy_generate
    yield "from_hf_generate (transformers' assisted generation, B = 1)", from_hf_generate()
    sys.path.insert(0, str(ROOT / "tests" / "adapters"))
    from _upstream import gpt_fast_dir, llmss_dir, load_gpt_fast_generate, load_llmss

    if gpt_fast_dir() is not None:
        yield "from_gpt_fast_generate (gpt-fast's generate, B = 1)", from_gpt_fast_generate(
            load_gpt_fast_generate(gpt_fast_dir()).generate)
    if llmss_dir() is not None:
        import torch

        loop = load_llmss(llmss_dir())
        for module in ("kvcache_model", "speculative_sampling_module"):  # its sample() raises on token 0
            setattr(loop[module], "sample", lambda probs, num_samples=1: torch.multinomial(probs, num_samples))
        yield "from_classic_loop (feifeibear's speculative_sampling, B = 1)", from_classic_loop(
            loop["speculative_sampling"])


def main() -> int:
    from specdec_check import check_generator
    from specdec_check.adapters.hf import hf_scenarios

    scenario = [s for s in hf_scenarios() if s.name == "hf-small-joint"]
    print(f"scenario {scenario[0].name}: V = {scenario[0].vocab_size}, {scenario[0].max_new_tokens} new tokens, "
          f"{scenario[0].rows_per_call} rows a call; quick mode, seed 0, one process\n")
    print("| bridge | verdict | rows | s | rows/s | time per row vs reference |")
    print("|---|---|---:|---:|---:|---:|")
    reference = None
    for name, generate in bridges():
        started = time.perf_counter()
        report = check_generator(generate, scenarios=scenario, mode="quick", seed=0)
        took = time.perf_counter() - started
        rate = report.samples_used / took
        reference = reference or rate
        print(f"| {name} | {report.verdict} | {report.samples_used:,} | {took:.1f} | {rate:,.0f} | "
              f"{reference / rate:.1f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
