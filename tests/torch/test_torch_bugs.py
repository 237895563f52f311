"""Key bugs of the catalogue (specdec_check.bugs), re-expressed in torch, are caught.

Each bug is a small edit of the reference algorithm (``_verify`` below, a plain-torch
transcription of torch_verify with switches). Detection is asserted two ways: the exact
path-law G-test rejects at alpha = 1e-9 on tiled rows (fixed seed), and, where the
checker is available, ``check_verifier(..., backend="torch")`` fails on a few scenarios.
The unmodified transcription passes both (the control).
"""

import pytest

torch = pytest.importorskip("torch")

from _torch_helpers import ALPHA, random_rows, tile, verify_pvalue  # noqa: E402

from specdec_check.samplers._torch import sample_rows  # noqa: E402


def _verify(bug=None):
    def verify(*, draft_token_ids, draft_probs, target_probs, generator):
        ids, q, p = draft_token_ids.long(), draft_probs.float(), target_probs.float()
        q = q / q.sum(-1, keepdim=True)
        p = p / p.sum(-1, keepdim=True)
        batch, gamma = ids.shape
        rows = torch.arange(batch)
        if bug == "generator_ignored":
            u = torch.rand((batch, gamma))  # the global RNG
        else:
            u = torch.rand((batch, gamma), generator=generator)
        p_at = torch.gather(p[:, :gamma], 2, ids[..., None])[..., 0]
        q_at = torch.gather(q, 2, ids[..., None])[..., 0]
        if bug == "ratio_inverted":  # accept with min(1, q/p): names swapped
            accepted = u * p_at < q_at
        elif bug == "one_hot_rule_on_stochastic_draft":  # q taken as one-hot: accept with p(x)
            accepted = u < p_at
        else:
            accepted = u * q_at < p_at
        stop = torch.cumprod(accepted.long(), 1).sum(1)
        final = p[rows, stop]
        if gamma:
            qi = stop.clamp(max=gamma - 1)
            if bug == "residual_from_first_position":  # residual always from position 0's rows
                res = (p[:, 0] - q[:, 0]).clamp(min=0)
            elif bug == "resample_from_target":  # no subtraction of q
                res = p[rows, qi]
            elif bug == "one_hot_rule_on_stochastic_draft":
                res = p[rows, qi].scatter(1, ids[rows, qi][:, None], 0.0)
            else:
                res = (p[rows, qi] - q[rows, qi]).clamp(min=0)
            final = torch.where((stop < gamma)[:, None], res, final)
            if bug == "bonus_from_wrong_row":
                final = torch.where((stop == gamma)[:, None], p[:, gamma - 1], final)
        if bug == "recovered_with_failed_uniform":  # inverse CDF with the coin that rejected (correlated)
            cdf = final.cumsum(-1)
            coin = torch.where(stop < gamma, u[rows, stop.clamp(max=gamma - 1)],
                               torch.rand(batch, generator=generator))
            token = (cdf <= (coin * cdf[:, -1])[:, None]).sum(-1).clamp(max=p.shape[-1] - 1)
        else:
            token = sample_rows(final, generator)
        cols = torch.arange(gamma + 1)
        padded = torch.cat([ids, torch.zeros((batch, 1), dtype=torch.int64)], 1)
        out = torch.where(cols < stop[:, None], padded, torch.full_like(padded, -1))
        out[rows, stop] = token
        invalid = ~torch.isfinite(draft_probs.float().sum((1, 2)) + target_probs.float().sum((1, 2)))
        return torch.where(invalid[:, None], torch.full_like(out, -1), out)  # as torch_verify: NaN rows -> -1

    verify.__name__ = verify.__qualname__ = f"torch_{bug or 'control'}"
    return verify


LAW_BUGS = ["ratio_inverted", "resample_from_target", "residual_from_first_position", "bonus_from_wrong_row",
            "recovered_with_failed_uniform", "one_hot_rule_on_stochastic_draft"]


def test_control_passes():
    ids, q, p = random_rows(31, batch=4, gamma=3, vocab=6)
    pvalue, impossible = verify_pvalue(_verify(), ids, q, p, n=20_000, seed=0)
    assert impossible == 0 and pvalue > ALPHA


@pytest.mark.parametrize("bug", LAW_BUGS)
def test_law_bug_is_caught_by_the_exact_path_law(bug):
    ids, q, p = random_rows(31, batch=4, gamma=3, vocab=6)
    pvalue, impossible = verify_pvalue(_verify(bug), ids, q, p, n=20_000, seed=0)
    assert pvalue < ALPHA or impossible > 0, f"{bug} not caught: p = {pvalue:.3g}"


def test_global_rng_bug_is_caught_by_rng_hygiene():
    ids, q, p = random_rows(2, batch=2, gamma=2, vocab=5)
    kw = dict(draft_token_ids=tile(ids, 50), draft_probs=tile(q, 50, torch.float32),
              target_probs=tile(p, 50, torch.float32))
    verify = _verify("generator_ignored")
    before = torch.random.get_rng_state().clone()
    a = verify(**kw, generator=torch.Generator().manual_seed(0))
    assert not torch.equal(torch.random.get_rng_state(), before)  # caught: the global state moved
    b = verify(**kw, generator=torch.Generator().manual_seed(0))
    assert not torch.equal(a, b)  # caught: same generator state, different output


def _checker():
    try:
        from specdec_check.checker import check_verifier
        from specdec_check.scenarios import default_verifier_battery
    except ImportError:  # pragma: no cover - checker not merged yet
        pytest.skip("specdec_check.checker.check_verifier is not available yet")
    return check_verifier, default_verifier_battery


SCENARIOS = {"low-acceptance", "opposite-ranking", "disjoint-supports", "corpus-bigram"}


@pytest.mark.parametrize("bug", [None, *LAW_BUGS, "generator_ignored"])
def test_checker_verdict_on_torch_bugs(bug):
    check_verifier, battery = _checker()
    scenarios = [s for s in battery() if s.name in SCENARIOS]
    report = check_verifier(_verify(bug), scenarios=scenarios, mode="quick", backend="torch", seed=3)
    if bug is None:
        assert report.passed, report.summary()
    else:
        assert not report.passed, f"{bug} passed the checker:\n{report.summary()}"
