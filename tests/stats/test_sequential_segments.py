"""SequentialIdentityTest.then: the e-process of a run split into shards is the product of the shards'
segments (each a Dirichlet-multinomial mixture started afresh), with the running maximum carried over."""

import numpy as np
import pytest

from specdec_check.stats import SequentialIdentityTest

PROBS = np.array([0.5, 0.3, 0.15, 0.05])


def _segment(counts, alpha=1e-3):
    return SequentialIdentityTest(PROBS, alpha=alpha).update(np.asarray(counts))


def test_then_multiplies_the_segments_and_carries_the_running_maximum():
    first, second = _segment([60, 25, 10, 5]), _segment([30, 50, 15, 5])
    log_first, log_second = np.log(first.e_value), np.log(second.e_value)
    max_second = second.result().max_evalue
    joined = first.then(second)
    assert joined.n == 200
    assert np.log(joined.e_value) == pytest.approx(log_first + log_second)
    assert joined.result().max_evalue == pytest.approx(max(1.0, np.exp(log_first) * max_second, np.exp(log_first)))
    # Later updates start a new segment: the product grows by that segment's own Bayes factor.
    third = _segment([10, 5, 3, 2])
    joined.update(np.array([10, 5, 3, 2]))
    assert np.log(joined.e_value) == pytest.approx(log_first + log_second + np.log(third.e_value))


def test_a_rejecting_segment_rejects_the_joined_process_and_violations_carry_over():
    null = _segment([50, 30, 15, 5])
    off = _segment([10, 10, 10, 70])  # far from PROBS: rejects on its own
    assert off.rejected and not null.rejected
    assert null.then(off).rejected
    impossible = SequentialIdentityTest(np.array([0.5, 0.5, 0.0]), alpha=1e-3)
    other = SequentialIdentityTest(np.array([0.5, 0.5, 0.0]), alpha=1e-3).update(np.array([1, 0, 1]))
    assert impossible.then(other).rejected and impossible.result().support_violations == (2,)


def test_then_refuses_another_test():
    with pytest.raises(ValueError, match="one test"):
        _segment([1, 1, 1, 1]).then(_segment([1, 1, 1, 1], alpha=1e-2))
    with pytest.raises(ValueError, match="one test"):
        _segment([1, 1, 1, 1]).then(SequentialIdentityTest(np.full(4, 0.25), alpha=1e-3))
    with pytest.raises(TypeError, match="SequentialIdentityTest"):
        _segment([1, 1, 1, 1]).then(np.ones(4))


def test_the_product_of_null_segments_keeps_its_false_alarm_rate():
    # Ville's inequality for the joined process: P(sup E >= 1/alpha) <= alpha. Simulated at alpha = 0.05 over
    # 400 seeded runs of 5 segments of 100 samples each: the count of rejections is Binomial(400, <= 0.05); at
    # most 40 (P(Binomial(400, 0.05) > 40) = 1.4e-5) keeps this test's own false-alarm rate below 1e-4. The
    # mixture is conservative at these sizes (measured: 0 of 400), so this guards against a joined process
    # that inflates the evidence (a product counted twice, a maximum taken over the wrong terms).
    rng = np.random.default_rng(20261201)
    rejected = 0
    for _ in range(400):
        joined = SequentialIdentityTest(PROBS, alpha=0.05)
        for _ in range(5):
            segment = SequentialIdentityTest(PROBS, alpha=0.05)
            for _ in range(4):
                segment.update(rng.multinomial(25, PROBS))
            joined.then(segment)
        rejected += joined.rejected
    assert rejected <= 40
