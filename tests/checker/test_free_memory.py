"""Freed heap pages go back to the system between a scenario's phases (issue 31: 12 MB left resident or not,
depending on the order of frees, moved the default battery's peak between 289 and 301 MB)."""

from __future__ import annotations

import ctypes.util
import sys

import numpy as np
import pytest

from specdec_check.scenarios import _memory


def _resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux") or ctypes.util.find_library("c") is None,
                    reason="glibc's malloc_trim: Linux only")
def test_freed_heap_pages_are_given_back():
    blocks = [np.ones(12_000) for _ in range(600)]  # 96 KB each: from the heap, 56 MB in all
    anchor = np.ones(12_000)  # lives above them: the heap cannot shrink from its top
    del blocks
    before = _resident_mb()
    _memory.return_free_memory()
    after = _resident_mb()
    assert before - after > 30, (before, after)
    del anchor
