"""Device-resident checking: outputs stay on the device, only counts cross to the host.

The law checks locate each output in the block's laws on the device (torch tensors), PIT them
there with a device generator and bincount them; ``TorchBackend.to_host`` must not see a
law-test output. An event of probability zero is flagged on the device and named by the host
path. All runs are seeded.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from specdec_check import check_verifier  # noqa: E402
from specdec_check.bugs import entry  # noqa: E402
from specdec_check.checker.chain.block import VerifierBlock  # noqa: E402
from specdec_check.checker.chain.contract import any_impossible, check_output  # noqa: E402
from specdec_check.checker.backends.torch_backend import TorchBackend, parse_on_device  # noqa: E402
from specdec_check.samplers import numpy_verify, torch_verify  # noqa: E402
from specdec_check.scenarios import VerifierScreen, default_verifier_battery  # noqa: E402

LAW_CHECKS = ("contract", "impossible", "first_token", "stop_conditional", "accepted_count", "step_law")


def _device_path(dtype="float32"):
    """The torch backend on the CPU counting where the outputs are, as it does on an accelerator (on the
    CPU it counts on the host by default)."""
    return TorchBackend("cpu", dtype, counts_on_device=True)


def _scenarios(*names):
    by_name = {s.name: s for s in default_verifier_battery()}
    return [by_name[n] for n in names]


def test_law_tests_never_bring_outputs_to_the_host(monkeypatch):
    seen = []
    original = TorchBackend.to_host

    def spy(self, output):
        seen.append(tuple(np.shape(output)))
        return original(self, output)

    monkeypatch.setattr(TorchBackend, "to_host", spy)
    report = check_verifier(torch_verify, backend=_device_path(), scenarios=_scenarios("corpus-bigram", "many-rows"),
                            mode="quick", seed=0, checks=LAW_CHECKS)
    assert report.passed, [f.message for f in report.findings]
    assert report.samples_used > 4096 and seen == []
    # the same run with the randomness checks moves only their small calls
    check_verifier(torch_verify, backend=_device_path(), scenarios=_scenarios("corpus-bigram"), mode="quick", seed=0)
    assert seen and all(shape[0] <= 4096 for shape in seen)


def test_device_and_host_paths_count_the_same_samples():
    device = check_verifier(torch_verify, backend=_device_path("float64"), scenarios=_scenarios("corpus-bigram"),
                            mode="quick", seed=2, checks=LAW_CHECKS)
    host = check_verifier(numpy_verify, scenarios=_scenarios("corpus-bigram"), mode="quick", seed=2, checks=LAW_CHECKS)
    assert device.passed and host.passed
    assert [(r.check, r.n) for r in device.results] == [(r.check, r.n) for r in host.results]


def test_parse_on_device_matches_the_host_parser_and_rejects_malformed_rows():
    ids = np.array([[1, 2], [1, 2], [1, 2], [1, 2]])
    good = np.array([[1, 2, 3], [1, 5, -1], [4, -1, -1], [1, 2, -1]])
    step = parse_on_device(torch.from_numpy(good), torch.from_numpy(ids), 9)
    _, host = check_output(good, ids, 9)
    for name in ("accepted", "final", "emitted"):
        np.testing.assert_array_equal(getattr(step, name).numpy(), getattr(host, name))
    for bad in ([[1, -1, 3]] + [[0, 0, 0]] * 3, [[-1, -1, -1]] + [[0, -1, -1]] * 3, [[9, 0, 0]] + [[0, -1, -1]] * 3,
                [[3, 4, -1]] + [[0, -1, -1]] * 3):
        assert parse_on_device(torch.tensor(bad), torch.from_numpy(ids), 9) is None
    assert parse_on_device(torch.zeros((4, 2), dtype=torch.int64), torch.from_numpy(ids), 9) is None


@pytest.mark.parametrize("name", ["resample_from_target", "ratio_inverted", "no_bonus_token"])
def test_device_flags_match_the_host_events(name):
    scenario = _scenarios("low-acceptance")[0]
    draw = scenario.draw(np.random.default_rng(0), pool=scenario.prompts())
    out = entry(name).sampler(draft_token_ids=draw.draft_token_ids, draft_probs=draw.draft_probs,
                              target_probs=draw.target_probs, generator=np.random.default_rng(1))
    problem, step = check_output(out, draw.draft_token_ids, scenario.vocab_size)
    assert problem is None
    block = VerifierBlock(draw, conditional=True, tables=scenario.law_tables())
    backend = TorchBackend(dtype="float64")
    device = block.on_device(backend.to_device)
    device_step = parse_on_device(torch.from_numpy(out), torch.from_numpy(draw.draft_token_ids), scenario.vocab_size)
    host_flag = any_impossible(step, block.outcome(step.accepted, step.final), block, tolerance=0.0)
    device_flag = any_impossible(device_step, device.outcome(device_step.accepted, device_step.final), device,
                                 tolerance=0.0)
    assert host_flag == device_flag == (name != "no_bonus_token")


def test_device_path_names_a_bug_with_the_host_message():
    report = check_verifier(entry("resample_from_target").sampler, scenarios=_scenarios("low-acceptance"),
                            mode="quick", seed=0)
    torch_bug = _torch_resample_from_target
    device = check_verifier(torch_bug, backend=_device_path("float64"), scenarios=_scenarios("low-acceptance"),
                            mode="quick", seed=0, checks=LAW_CHECKS)
    assert not report.passed and not device.passed
    assert device.failures[0].check == "impossible" and "residual" in device.failures[0].message


def _torch_resample_from_target(*, draft_token_ids, draft_probs, target_probs, generator):
    """A torch verifier that resamples from the target row at a rejection (not the residual)."""
    ids, q, p = draft_token_ids.long(), draft_probs.double(), target_probs.double()
    batch, gamma = ids.shape
    u = torch.rand((batch, gamma + 1), generator=generator, dtype=torch.float64)
    p_at = torch.gather(p[:, :gamma], 2, ids[..., None])[..., 0]
    q_at = torch.gather(q, 2, ids[..., None])[..., 0]
    rejected = u[:, :gamma] * q_at >= p_at
    stop = torch.where(rejected.any(1), rejected.to(torch.uint8).argmax(1), gamma)
    rows = p[torch.arange(batch), stop]
    token = torch.multinomial(rows, 1, generator=generator)[:, 0]
    out = torch.full((batch, gamma + 1), -1, dtype=torch.int64)
    cols = torch.arange(gamma)
    out[:, :gamma] = torch.where(cols < stop[:, None], ids, -1)
    out[torch.arange(batch), stop] = token
    return out


def test_screen_runs_on_the_torch_backend():
    from specdec_check.checker.chain.screen import COUPLING_PAIRS

    report = check_verifier(entry("no_bonus_token").sampler, scenarios=[VerifierScreen.default()], seed=0)
    device = check_verifier(torch_verify, backend=_device_path(), scenarios=[VerifierScreen.default()], seed=0)
    assert report.inefficiencies and not device.findings and device.samples_used == 16 + 6 + 24 + 16 + 28 + 2 * 2 * COUPLING_PAIRS
    assert device.verdict == "inconclusive"  # the screen alone runs no law test: no verdict of exactness


from _torch_helpers import cuda_test  # noqa: E402


@cuda_test
def test_cuda_law_tests_stay_on_the_device(monkeypatch):
    seen = []
    original = TorchBackend.to_host
    monkeypatch.setattr(TorchBackend, "to_host", lambda self, out: seen.append(tuple(out.shape)) or original(self, out))
    for dtype in ("float32", "bfloat16"):
        report = check_verifier(torch_verify, backend="torch", device="cuda", dtype=dtype, mode="quick", seed=0,
                                scenarios=_scenarios("corpus-bigram", "many-rows", "large-vocabulary"),
                                checks=LAW_CHECKS)
        assert report.passed and report.device.startswith("cuda"), [f.message for f in report.findings]
    assert seen == []
