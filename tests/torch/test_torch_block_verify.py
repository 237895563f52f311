"""``samplers.torch_block_verify`` against the exact block-verification law of the rows it sees.

Calibration: each law assertion is ``stats.identity_test`` (exact, conservative) at alpha 1e-9 on
exactly multinomial counts (one row set tiled, drafts from its draft rows; see
``tests/rules/_rules_helpers.py``), fixed seeds. The expected law is that of the rows once cast to the
dtype and renormalised (``cast_law_rows``), which is what the sampler implements.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "rules"))
from _rules_helpers import ALPHA, parse_outputs, path_cell_counts, path_cell_law, row_set, tiled_inputs  # noqa: E402
from _torch_helpers import cuda_test  # noqa: E402

from specdec_check import exact, stats  # noqa: E402
from specdec_check._torch_utils import cast_law_rows  # noqa: E402
from specdec_check.samplers import torch_block_verify  # noqa: E402


def _law_test(q, p, *, n, seed, dtype, device="cpu"):
    ids, dq, tp = tiled_inputs(q, p, n, seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    out = torch_block_verify(draft_token_ids=torch.from_numpy(ids).to(device),
                             draft_probs=torch.from_numpy(dq).to(dtype).to(device),
                             target_probs=torch.from_numpy(tp).to(dtype).to(device), generator=gen)
    assert out.device.type == torch.device(device).type and out.dtype == torch.int64
    out = out.cpu().numpy()
    law = path_cell_law(exact.block_path_step_law, cast_law_rows(q, dtype), cast_law_rows(p, dtype))
    return stats.identity_test(path_cell_counts(out, ids, p.shape[1]), law, alpha=ALPHA)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("gamma, vocab, seed", [(1, 4, 1), (3, 4, 2)])
def test_torch_block_verify_matches_block_law(dtype, gamma, vocab, seed):
    q, p = row_set(seed, gamma, vocab, zeros=True)
    result = _law_test(q, p, n=150_000, seed=seed, dtype=dtype)
    assert not result.rejected, result


def test_torch_block_verify_paper_example():
    """The paper's example (Sun et al., ICLR 2025, Section 2): 10^6 rows, mean accepted within
    Hoeffding's alpha = 1e-9 radius of 11/9."""
    n = 1_000_000
    ids, dq, tp = tiled_inputs(np.tile([2 / 3, 1 / 3], (2, 1)), np.tile([1 / 3, 2 / 3], (3, 1)), n, seed=3)
    out = torch_block_verify(draft_token_ids=torch.from_numpy(ids), draft_probs=torch.from_numpy(dq),
                             target_probs=torch.from_numpy(tp), generator=torch.Generator().manual_seed(4))
    accepted = (out >= 0).sum(dim=1).double().mean().item() - 1
    assert abs(accepted - 11 / 9) < 2 * np.sqrt(np.log(2 / ALPHA) / (2 * n))


def test_torch_block_verify_edge_cases():
    q, p = row_set(5, 2, 4, zeros=True)
    ids, dq, tp = tiled_inputs(q, p, 20, seed=5)
    ids_t, dq_t, tp_t = torch.from_numpy(ids), torch.from_numpy(dq), torch.from_numpy(tp)
    bad = tp_t.clone()
    bad[3, 1, 2] = float("nan")
    out = torch_block_verify(draft_token_ids=ids_t, draft_probs=dq_t, target_probs=bad,
                             generator=torch.Generator().manual_seed(0))
    assert (out[3] == -1).all()
    parse_outputs(np.delete(out.numpy(), 3, axis=0), np.delete(ids, 3, axis=0))
    g0 = torch_block_verify(draft_token_ids=ids_t[:, :0], draft_probs=dq_t[:, :0], target_probs=tp_t[:, :1],
                            generator=torch.Generator().manual_seed(0))
    assert g0.shape == (20, 1) and (torch.from_numpy(p[0])[g0[:, 0]] > 0).all()
    with pytest.raises(TypeError, match="torch.Generator"):
        torch_block_verify(draft_token_ids=ids_t, draft_probs=dq_t, target_probs=tp_t,
                           generator=np.random.default_rng())
    with pytest.raises(ValueError, match="bonus position"):
        torch_block_verify(draft_token_ids=ids_t, draft_probs=dq_t, target_probs=tp_t[:, :2],
                           generator=torch.Generator().manual_seed(0))
    a = torch_block_verify(draft_token_ids=ids_t, draft_probs=dq_t, target_probs=tp_t,
                           generator=torch.Generator().manual_seed(7))
    b = torch_block_verify(draft_token_ids=ids_t, draft_probs=dq_t, target_probs=tp_t,
                           generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b)


@cuda_test
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_torch_block_verify_on_cuda(dtype):
    q, p = row_set(6, 3, 5, zeros=True)
    result = _law_test(q, p, n=200_000, seed=6, dtype=dtype, device="cuda")
    assert not result.rejected, result
