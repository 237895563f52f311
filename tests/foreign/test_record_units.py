"""Record / replay without the command line: a recorded call must be asked again exactly (seed and inputs)."""

from __future__ import annotations

import numpy as np
import pytest

from specdec_check.foreign import answer, record, replay
from specdec_check.foreign._replay import ReplayMismatch
from specdec_check.samplers import numpy_verify


def _call(sampler, seed):
    ids = np.array([[1, 0]])
    q = np.array([[[0.5, 0.5], [0.25, 0.75]]])
    p = np.array([[[0.25, 0.75], [0.5, 0.5], [1.0, 0.0]]])
    return sampler(draft_token_ids=ids, draft_probs=q, target_probs=p, generator=np.random.default_rng(seed))


def test_answers_come_back_in_order_and_a_changed_call_is_refused(tmp_path):
    recorder = record(tmp_path / "rec", "verifier")
    recorded = [_call(recorder, seed) for seed in (1, 2)]
    answer(tmp_path / "rec", tmp_path / "out", numpy_verify)
    player = replay(tmp_path / "rec", tmp_path / "out", "verifier")
    replayed = [_call(player, seed) for seed in (1, 2)]
    assert all(a.shape == b.shape for a, b in zip(recorded, replayed))
    with pytest.raises(ReplayMismatch, match="call 1 differs"):
        _call(replay(tmp_path / "rec", tmp_path / "out", "verifier"), 99)  # another seed: another call
    with pytest.raises(ReplayMismatch, match="call 3 was not recorded"):
        _call(player, 3)
