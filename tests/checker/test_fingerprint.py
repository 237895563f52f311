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
    np.random.default_rng(5).dirichlet(np.ones(7), (1, 2)),
    np.random.default_rng(6).dirichlet(np.ones(7), (16, 5)),
], ids=["float rows", "float vector", "int64 vector", "small int vector", "one row's laws", "sixteen rows' laws"])
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


@pytest.mark.parametrize("size", [BIG + 3, 27])  # past the words digest, and within the raw-bytes fingerprint
def test_the_same_words_in_another_shape_or_dtype_are_another_fingerprint(size):
    backend = make_backend("numpy")
    ints = np.arange(size, dtype=np.int64)
    assert backend.fingerprint(ints) != backend.fingerprint(ints.view(np.uint64))
    half = (size - 3) // 2
    assert backend.fingerprint(ints[:-3].reshape(-1, half)) != backend.fingerprint(ints[:-3].reshape(half, -1))


@pytest.mark.parametrize("write", [np.negative, lambda a: 2.0 * a, lambda a: 0.5 * a],
                         ids=["negate all", "double all", "halve all"])
@pytest.mark.parametrize("shape", [(BIG + 1,), (BIG // 8 + 2, 8), (2 * BIG,)], ids=["odd vector", "rows", "even vector"])
def test_structured_writes_over_a_big_array_change_the_fingerprint(write, shape):
    """Writes that change many 64-bit words by the same power of two (a sign flip is 2^63, a doubling moves the
    exponent bits) must not cancel in the words digest: before the mixer, negating an array of even length, or
    doubling 131,800 rows of logits, kept the fingerprint."""
    backend = make_backend("numpy")
    array = np.random.default_rng(4).standard_normal(shape)
    assert backend.fingerprint(write(array)) != backend.fingerprint(array)
