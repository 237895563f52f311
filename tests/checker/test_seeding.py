"""Generators made together for a block of calls are the generators made one at a time (issue 31)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from specdec_check.checker.backends.base import NumpyBackend
from specdec_check.checker.backends.seeding import SeedWords, generators, seed_words
from specdec_check.checker.core.context import SeedBatch

EDGE_SEEDS = [0, 1, 2**32 - 1, 2**32, 2**32 + 1, 2**63 - 2, 2**64 - 1]


def test_the_words_are_seedsequences_state_for_one_and_two_word_seeds():
    rng = np.random.default_rng(0)
    seeds = np.concatenate([np.array(EDGE_SEEDS, dtype=np.uint64), rng.integers(0, 2**63 - 1, 3000).astype(np.uint64),
                            rng.integers(0, 2**32, 1000).astype(np.uint64)])
    words = seed_words(seeds)
    assert words.shape == (seeds.size, 4) and words.dtype == np.uint64
    for seed, row in zip(seeds.tolist(), words):
        assert np.array_equal(row, np.random.SeedSequence(seed).generate_state(4, np.uint64)), seed


def test_the_generators_draw_spawn_and_pickle_as_pcg64_of_the_seed():
    seeds = EDGE_SEEDS[:-1] + [123456789, 2**62 + 7]
    for seed, made in zip(seeds, generators(seeds)):
        plain = np.random.Generator(np.random.PCG64(seed))
        assert made.bit_generator.state == plain.bit_generator.state
        assert np.array_equal(made.random(7), plain.random(7)) and made.integers(0, 10**9) == plain.integers(0, 10**9)
        assert [c.random() for c in made.spawn(3)] == [c.random() for c in plain.spawn(3)]
        assert [c.random() for c in made.spawn(1)] == [c.random() for c in plain.spawn(1)]  # the count goes on
        sequence = made.bit_generator.seed_seq
        assert sequence.entropy == plain.bit_generator.seed_seq.entropy == seed
        assert np.array_equal(sequence.generate_state(3), plain.bit_generator.seed_seq.generate_state(3))
        again = pickle.loads(pickle.dumps(made))
        assert again.random() == plain.random()
        assert type(pickle.loads(pickle.dumps(sequence))) is np.random.SeedSequence


def test_seed_words_refuses_what_is_not_a_seed():
    with pytest.raises(ValueError, match="integers in"):
        seed_words(np.array([-1]))
    with pytest.raises(ValueError, match="integers in"):
        seed_words(np.array([0.5]))


class _Context:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.backend = NumpyBackend()

    def next_seed(self):
        return int(self.rng.integers(0, 2**63 - 1))


@pytest.mark.parametrize("count", [1, 2, 15, 16, 64, 100])
@pytest.mark.parametrize("taken", [0, 1, 7, "all"])
def test_a_seed_batch_hands_out_the_per_call_seeds_and_leaves_the_stream_where_they_would(count, taken):
    taken = count if taken == "all" else min(taken, count)
    batched, plain = _Context(count), _Context(count)
    with SeedBatch(batched, count) as seeds:
        got = [seeds.next() for _ in range(taken)]
        made = [batched.backend.generator(seed) for seed in got]
    assert got == [plain.next_seed() for _ in range(taken)]
    assert batched.rng.bit_generator.state == plain.rng.bit_generator.state  # the untaken seeds went back
    for seed, generator in zip(got, made):
        assert generator.bit_generator.state == np.random.Generator(np.random.PCG64(seed)).bit_generator.state
    assert batched.backend._prepared == {}  # nothing prepared outlives the batch


def test_a_prepared_generator_is_handed_out_once():
    backend = NumpyBackend()
    seeds = list(range(100, 132))
    backend.prepare_generators(seeds)
    first = backend.generator(105)
    second = backend.generator(105)  # a replay of the call (the guard's rerun on copies): a fresh one
    assert first is not second and first.random() == second.random()
    backend.discard_generators(seeds)
    assert backend._prepared == {}
    assert pickle.loads(pickle.dumps(backend))._prepared == {}

