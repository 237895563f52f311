"""The input fingerprint (Backend.fingerprint): any write into an input changes it, big arrays included (their
64-bit words are summed with odd weights before hashing), and equal content gives an equal fingerprint."""
import numpy as np
import pytest

from specdec_check.checker.backends import make_backend
from specdec_check.checker.backends.base import WORDS_DIGEST_BYTES

BIG = WORDS_DIGEST_BYTES // 8 + 6  # items past the words-digest threshold


@pytest.mark.parametrize("array", [
    np.random.default_rng(0).standard_normal((BIG // 16 + 1, 16)),
    np.random.default_rng(1).random(BIG),
    np.random.default_rng(2).integers(0, 50, BIG),
    np.random.default_rng(3).integers(0, 50, 1000),
], ids=["float rows", "float vector", "int64 vector", "small int vector"])
def test_every_single_write_changes_the_fingerprint(array):
    backend = make_backend("numpy")
    before = backend.fingerprint(array)
    assert backend.fingerprint(array.copy()) == before
    flat_size = array.size
    for index in (0, 1, flat_size // 2, flat_size - 1):
        for new in (array.flat[index] + 1, -array.flat[index] - 1, 0):
            if new == array.flat[index]:
                continue
            changed = array.copy()
            changed.flat[index] = new
            assert backend.fingerprint(changed) != before, (index, new)
    swapped = array.copy()
    flat = swapped.reshape(-1)
    i, j = 3, flat_size - 2
    if flat[i] != flat[j]:
        flat[i], flat[j] = flat[j], flat[i]  # the same values elsewhere: the weights are per position
        assert backend.fingerprint(swapped) != before


def test_the_same_words_in_another_shape_or_dtype_are_another_fingerprint():
    backend = make_backend("numpy")
    ints = np.arange(BIG + 3, dtype=np.int64)
    assert backend.fingerprint(ints) != backend.fingerprint(ints.view(np.uint64))
    assert backend.fingerprint(ints[:-3].reshape(-1, BIG // 2)) != backend.fingerprint(ints[:-3].reshape(BIG // 2, -1))
