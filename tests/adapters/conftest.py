"""Adapter tests: the shared torch statistics of tests/torch (calibrated G-test, ALPHA = 1e-9) are importable
here, and torch runs on one thread (tiny per-row calls; see tests/torch/conftest.py)."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "torch"))


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
