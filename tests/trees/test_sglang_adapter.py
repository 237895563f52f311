"""The SGLang tree adapter and the kernel port it is tested on.

The port (specdec_check/bugs/_sglang_kernel.py) is a fixture written from the CUDA kernel at
sgl-project/sglang b227f63; it is held to SGLang's own kernel test
(sgl-kernel/tests/speculative/test_speculative_sampling.py at 24dcd7c4: two hand-built trees, near
one-hot targets, both threshold settings), whose expected outputs came from the real kernel.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from specdec_check import bugs  # noqa: E402
from specdec_check.adapters import from_sglang_tree, sglang_tree_layout  # noqa: E402
from specdec_check.bugs._sglang_kernel import tree_speculative_sampling_target_only as port  # noqa: E402
from specdec_check.checker import check_tree_verifier  # noqa: E402
from specdec_check.scenarios import default_tree_battery  # noqa: E402

# sgl-kernel/tests/speculative/test_speculative_sampling.py (sgl-project/sglang 24dcd7c4)
CANDIDATES = [[0, 1, 2, 3, 4, 5], [7, 8, 9, 10, 11, 12]]
RETRIVE_INDEX = [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]
NEXT_TOKEN = [[1, 2, -1, 4, 5, -1], [4, 2, 3, -1, 5, -1]]
NEXT_SIBLING = [[-1, 3, -1, -1, -1, -1], [-1, -1, -1, -1, 1, -1]]
CASES = [  # threshold_single, threshold_acc, predicts, accept_index, accept_token_num
    (1, 1, [3, -1, -1, 4, 5, 18, 11, -1, -1, -1, 12, 18], [[0, 3, 4, 5], [6, 10, 11, -1]], [3, 2]),
    (0, 0, [1, 2, 18, -1, -1, -1, 11, -1, -1, -1, 12, 18], [[0, 1, 2, -1], [6, 10, 11, -1]], [2, 2]),
]


def _target_probs():
    logits = torch.full((2, 6, 20), 1.0)
    logits[0, 0, 3] = logits[0, 3, 4] = logits[0, 4, 5] = 10
    logits[1, 0, 11] = logits[1, 4, 12] = 10
    for i in range(2):
        for j in range(6):
            if logits[i, j].max() < 10:
                logits[i, j, 18] = 10
    return torch.softmax(logits / 0.01, dim=-1)


@pytest.mark.parametrize("case", CASES, ids=["thresholds-1", "thresholds-0"])
def test_the_port_reproduces_sglangs_kernel_test(case):
    single, acc, predicts_expected, accept_expected, num_expected = case
    gen = torch.Generator().manual_seed(0)
    predicts = torch.full((12,), -1, dtype=torch.int32)
    accept_index = torch.full((2, 4), -1, dtype=torch.int32)
    accept_num = torch.zeros(2, dtype=torch.int32)
    target = _target_probs()
    port(predicts=predicts, accept_index=accept_index, accept_token_num=accept_num,
         candidates=torch.tensor(CANDIDATES), retrive_index=torch.tensor(RETRIVE_INDEX),
         retrive_next_token=torch.tensor(NEXT_TOKEN), retrive_next_sibling=torch.tensor(NEXT_SIBLING),
         uniform_samples=torch.rand(2, 6, generator=gen),
         uniform_samples_for_final_sampling=torch.rand(2, generator=gen),
         target_probs=target, draft_probs=torch.zeros_like(target), threshold_single=single, threshold_acc=acc)
    assert predicts.tolist() == predicts_expected
    assert accept_index.tolist() == accept_expected
    assert accept_num.tolist() == num_expected


def test_the_layout_is_sglangs_first_child_next_sibling():
    first, sibling, depth = sglang_tree_layout(torch.tensor([[-1, 0, -1, 2, 3]]))
    assert first.tolist() == [NEXT_TOKEN[0]] and sibling.tolist() == [NEXT_SIBLING[0]] and depth == 3


@pytest.mark.parametrize("case", CASES, ids=["thresholds-1", "thresholds-0"])
def test_the_adapter_gives_the_kernels_tokens(case):
    """Row 0 of SGLang's test through the contract: parents [-1, 0, -1, 2, 3] (siblings in index order, as there)."""
    single, acc, predicts_expected, accept_expected, num_expected = case
    verify = from_sglang_tree(port, threshold_single=single, threshold_acc=acc)
    target = _target_probs()[:1]
    out = verify(parents=torch.tensor([[-1, 0, -1, 2, 3]]), draft_token_ids=torch.tensor([CANDIDATES[0][1:]]),
                 draft_probs=torch.zeros_like(target), target_probs=target,
                 generator=torch.Generator().manual_seed(1))
    expected = [predicts_expected[i] for i in accept_expected[0] if i >= 0]
    assert out.tolist() == [expected + [-1] * (4 - len(expected))]


def test_the_fixed_kernel_passes_clean_and_the_boundary_passes_with_its_edge_case():
    scenarios = [s for s in default_tree_battery("topk") if s.name in ("star-3-enumerable", "eagle-26")]
    fixed = check_tree_verifier(bugs.control_sglang_fixed, scenarios=scenarios, mode="quick", seed=1)
    assert fixed.passed and not fixed.warnings, fixed.summary()
    # coin <= S accepts a child of probability 0 only when the coin is exactly 0: an edge case with its
    # rate, not a failed run (issue 25); strict=True makes it one.
    boundary = check_tree_verifier(bugs.sglang_target_only, scenarios=scenarios, mode="quick", seed=1)
    assert boundary.verdict == "passed" and [f.check for f in boundary.warnings][:1] == ["zero_coins"]
    assert "every coin exactly 0" in boundary.warnings[0].message
    strict = check_tree_verifier(bugs.sglang_target_only, scenarios=scenarios[:1], mode="quick", seed=1, strict=True,
                                 checks=["contract", "zero_coins"])
    assert [f.check for f in strict.failures] == ["zero_coins"]


def test_the_adapter_runs_on_the_torch_backend():
    scenarios = [s for s in default_tree_battery("topk") if s.name == "random-trees"]
    report = check_tree_verifier(bugs.control_sglang_fixed, scenarios=scenarios, mode="quick", seed=2, backend="torch")
    assert report.passed, report.summary()


@pytest.mark.parametrize("name", ["torch_verify_tree_iid", "torch_verify_tree_without_replacement",
                                  "torch_verify_tree_topk"])
def test_the_torch_references_pass_in_float32(name):
    from specdec_check import samplers

    verify = getattr(samplers, name)
    scenarios = [s for s in default_tree_battery(verify.drafting) if s.name in ("small-tree-enumerable", "eagle-26")]
    report = check_tree_verifier(verify, scenarios=scenarios, mode="quick", seed=4, backend="torch")
    assert report.passed, report.summary()
    assert report.dtype == "float32"


def test_the_adapter_takes_kernels_without_draft_probs():
    """Later sgl-kernel versions drop ``draft_probs`` from the signature (01fe7c2): the adapter follows."""
    def newer(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
              retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs,
              threshold_single=1.0, threshold_acc=1.0, deterministic=True):
        port(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
             retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs,
             torch.zeros_like(target_probs), threshold_single, threshold_acc, deterministic, strict=True)

    scenarios = [s for s in default_tree_battery("topk") if s.name == "star-8"]
    report = check_tree_verifier(from_sglang_tree(newer), scenarios=scenarios, mode="quick", seed=5)
    assert report.passed, report.summary()
    with pytest.raises(TypeError, match="callable"):
        from_sglang_tree(None)


def test_the_adapter_refuses_non_finite_rows_by_default():
    verify = from_sglang_tree(port)
    target = np.full((1, 2, 3), 1 / 3)
    target[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        verify(parents=np.array([[-1]]), draft_token_ids=np.array([[0]]), draft_probs=target, target_probs=target,
               generator=np.random.default_rng(0))
