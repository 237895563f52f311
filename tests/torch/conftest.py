"""Torch tests: each module starts with ``pytest.importorskip("torch")``; CUDA tests carry ``cuda_test``.

Every test here runs with one CPU thread for torch (restored after): the inputs are small, and
on a busy machine torch's intra-op thread pool makes tiny ops (the per-row HF and gpt-fast
adapters) up to 1000x slower. Set SPECDEC_TORCH_THREADS to override.
"""

import os

import pytest


@pytest.fixture(autouse=True)
def _torch_threads():
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("SPECDEC_TORCH_THREADS", "1")))
    try:
        yield
    finally:
        torch.set_num_threads(before)
