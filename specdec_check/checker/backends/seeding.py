"""Fresh ``numpy.random.Generator(PCG64(seed))`` objects for a block of seeds at once, the same generators.

Every sampler call gets a fresh generator seeded from the scenario's stream. Built one at a time, a generator costs
13 us (30 us inside a run, caches cold): most of it is :class:`numpy.random.SeedSequence` hashing the seed into the
four 64-bit words that seed PCG64, one small numpy operation at a time; at one row per call that is more than the
verifier itself (issue 31). :func:`seed_words` computes the words of many seeds with the same 32-bit arithmetic in a
few vectorised passes, and :func:`generators` hands each to ``PCG64`` through :class:`SeedWords`, a seed sequence
that returns them (2 us a generator). The generators are those of ``PCG64(seed)``, draw for draw; their
``bit_generator.seed_seq`` is a :class:`SeedWords` that answers like ``SeedSequence(seed)`` (its entropy, its
other states, its spawned children, pickled as one) but is not an instance of that class: a sampler that checks
``isinstance(..., numpy.random.SeedSequence)`` (none of the peers' samplers looks at it) sees the difference, on the
calls whose generators were made together (blocks of 16 calls or more; the others get ``PCG64(seed)`` itself).
"""

from __future__ import annotations

import numpy as np
from numpy.random.bit_generator import ISeedSequence, ISpawnableSeedSequence

__all__ = ["SeedWords", "generators", "seed_words"]

# numpy's SeedSequence (numpy/random/bit_generator.pyx, after M. E. O'Neill's seed_seq of the PCG paper, 2015)
_INIT_A = 0x43B0D7E5
_MULT_A = 0x931E8875
_INIT_B = 0x8B51F9DD
_MULT_B = 0x58F38DED
_MIX_MULT_L = 0xCA01F9DD
_MIX_MULT_R = 0x4973F715
_XSHIFT = 16  # half the bits of a uint32 word
_MASK32 = 0xFFFFFFFF
_POOL = 4  # SeedSequence's default pool size, in uint32 words
#: PCG64 asks its seed sequence for this state: two 128-bit numbers (state and increment) as four uint64 words.
PCG64_WORDS = 4


def _hash_constants(count: int, start: int, mult: int) -> list:
    """The hash constant before each of ``count`` hashes: it is multiplied by ``mult`` at every hash whatever the
    data, so it is the same sequence for every seed."""
    out, value = [], start
    for _ in range(count):
        out.append(value)
        value = (value * mult) & _MASK32
    return out


# mix_entropy hashes 4 pool words, then every ordered pair of distinct pool words: 4 + 12 hashes
_MIX_CONSTANTS = _hash_constants(_POOL + _POOL * (_POOL - 1), _INIT_A, _MULT_A)
_STATE_CONSTANTS = _hash_constants(2 * PCG64_WORDS, _INIT_B, _MULT_B)


def _hashmix(value: np.ndarray, const: int) -> np.ndarray:
    """``hashmix``: ``(value ^ c) * (c * MULT_A)``, then ``x ^= x >> 16`` (uint32 arithmetic, wrapping)."""
    value = (value ^ np.uint32(const)) * np.uint32((const * _MULT_A) & _MASK32)
    return value ^ (value >> np.uint32(_XSHIFT))


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``mix``: ``MIX_MULT_L x - MIX_MULT_R y``, then ``r ^= r >> 16`` (uint32 arithmetic, wrapping)."""
    result = np.uint32(_MIX_MULT_L) * x - np.uint32(_MIX_MULT_R) * y
    return result ^ (result >> np.uint32(_XSHIFT))


def seed_words(seeds) -> np.ndarray:
    """``SeedSequence(seed).generate_state(4, np.uint64)`` for each seed in ``[0, 2**64)``: uint64 ``[n, 4]``.

    The entropy of an integer seed is its 32-bit words, least significant first (one word below 2**32, two
    above); SeedSequence hashes them into a pool of four words, padding with zero words (``hashmix(0)``, which
    is what it hashes past the end of the entropy), mixes every pool word into every other, and hashes the pool
    cyclically into the state words (numpy's ``mix_entropy`` and ``generate_state``).
    """
    seeds = np.asarray(seeds)
    if seeds.ndim != 1 or (seeds.size and (seeds.dtype.kind not in "iu" or int(seeds.min()) < 0)):
        raise ValueError(f"seeds must be a 1-d array of integers in [0, 2**64); got {seeds.dtype} {seeds.shape}.")
    seeds = seeds.astype(np.uint64)
    entropy = [(seeds & np.uint64(_MASK32)).astype(np.uint32), (seeds >> np.uint64(32)).astype(np.uint32)]
    constants = iter(_MIX_CONSTANTS)
    pool = [_hashmix(entropy[i] if i < len(entropy) else np.zeros_like(entropy[0]), next(constants))
            for i in range(_POOL)]
    for source in range(_POOL):
        for target in range(_POOL):
            if source != target:
                pool[target] = _mix(pool[target], _hashmix(pool[source], next(constants)))
    state = np.empty((seeds.size, 2 * PCG64_WORDS), dtype=np.uint32)
    for i, const in enumerate(_STATE_CONSTANTS):
        state[:, i] = _state_hash(pool[i % _POOL], const)
    # two uint32 words to a uint64, the first the low half (SeedSequence views its words as little-endian)
    low, high = state[:, 0::2].astype(np.uint64), state[:, 1::2].astype(np.uint64)
    return low | (high << np.uint64(32))


def _state_hash(value: np.ndarray, const: int) -> np.ndarray:
    """``generate_state``'s hash of a pool word: ``(value ^ c) * (c * MULT_B)``, then ``x ^= x >> 16``."""
    value = (value ^ np.uint32(const)) * np.uint32((const * _MULT_B) & _MASK32)
    return value ^ (value >> np.uint32(_XSHIFT))


class SeedWords:
    """The seed sequence of ``PCG64(seed)`` with its state words already computed (:func:`seed_words`).

    ``generate_state(4, np.uint64)`` (what PCG64 asks for) returns them; everything else a seed sequence is
    asked (other states, ``spawn``, ``entropy``, ``spawn_key``, ``pool``, ``n_children_spawned``) is answered by
    ``SeedSequence(seed)``, made when first needed, so children spawned from a generator are those of
    ``PCG64(seed)``'s. Pickled, it is that ``SeedSequence``.
    """

    __slots__ = ("seed", "_words", "_sequence")

    def __init__(self, seed: int, words: np.ndarray):
        self.seed, self._words, self._sequence = int(seed), words, None

    @property
    def sequence(self) -> np.random.SeedSequence:
        """``SeedSequence(seed)``, the sequence this one stands for."""
        if self._sequence is None:
            self._sequence = np.random.SeedSequence(self.seed)
        return self._sequence

    def generate_state(self, n_words, dtype=np.uint32):
        if (type(n_words) is int and n_words == PCG64_WORDS and dtype in (np.uint64, np.dtype(np.uint64))
                and self._words is not None):
            return self._words.copy()
        return self.sequence.generate_state(n_words, dtype)

    def spawn(self, n_children):
        return self.sequence.spawn(n_children)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.sequence, name)

    def __repr__(self):
        return repr(self.sequence)

    def __reduce__(self):
        return self.sequence.__reduce__()


ISeedSequence.register(SeedWords)
ISpawnableSeedSequence.register(SeedWords)


def generators(seeds) -> list:
    """``[numpy.random.Generator(numpy.random.PCG64(seed)) for seed in seeds]``, the same generators at a sixth
    of the cost (see the module docstring)."""
    seeds = [int(s) for s in seeds]
    words = seed_words(np.array(seeds, dtype=np.uint64)) if seeds else None
    return [np.random.Generator(np.random.PCG64(SeedWords(seed, words[i]))) for i, seed in enumerate(seeds)]
