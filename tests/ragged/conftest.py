"""Tests of the ragged verifier kind (the production calling convention).

Torch runs with one CPU thread here (restored after): the calls are small, and on a busy two-core
machine torch's intra-op thread pool makes tiny ops up to 10x slower (measured: the torch reference
on the V=7 scenario, quick mode, 1.2 s with one thread, 9.8 s with two). Set SPECDEC_TORCH_THREADS to override.
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


def pytest_configure(config):
    config.addinivalue_line("markers", "optional: needs software this machine may lack (vLLM, Triton); skipped "
                                       "when it does not import")
