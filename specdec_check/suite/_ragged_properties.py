"""Properties of a ragged verifier (the production calling convention), for the installed suite.

``verify(*, draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k, top_p,
generator)`` comes from the ``specdec_ragged_verifier`` fixture (``--specdec-ragged-verifier``,
``SPECDEC_RAGGED_VERIFIER``, ini ``specdec_ragged_verifier``; default the numpy reference). Each
example is a :func:`~specdec_check.strategies.ragged_batches` call. Structural properties (the
per-request contract, greedy requests exactly, events of probability zero, determinism) spend no
alpha; ``ragged_laws`` runs :func:`~specdec_check.checker.check_ragged_verifier` on the example's
layout in quick mode and spends its example's share of the run's false-alarm budget.
"""

from __future__ import annotations

import numpy as np
from hypothesis import note

from specdec_check.strategies import RaggedBatch, ragged_batches

from ._properties import MODE, Property, _backend, _checker_options, _fail, _name, _options_src, seeds

__all__ = ["RAGGED_PROPERTIES", "RaggedProperty"]

#: The law checks the statistical property runs (alpha split between them inside the check).
LAW_CHECKS = ("first_token", "stop_conditional", "accepted_count", "step_law")


class RaggedProperty(Property):
    """A :class:`~specdec_check.suite._properties.Property` of a ragged verifier (``test_ragged_<name>``)."""

    @property
    def test_name(self) -> str:
        return f"test_ragged_{self.name}"


def _scenario_src(batch: RaggedBatch) -> str:
    s = batch.scenario
    return (f"RaggedScenario('repro', {s.vocab_size}, {list(s.requests)!r}, draft_probs_given={s.draft_probs_given})")


def _repro(verify, batch: RaggedBatch, seed: int, options: dict, body: str) -> str:
    return ("python -c \"import numpy as np, pkgutil; from specdec_check.scenarios import RaggedScenario, "
            "RaggedRequest; from specdec_check.checker.backends import make_backend, check_ragged_verifier; "
            "from specdec_check.checker.ragged.caller import ragged_inputs; "
            f"v = pkgutil.resolve_name({_name(verify)!r}); s = {_scenario_src(batch)}; {body}\"")


def _call(verify, batch: RaggedBatch, seed: int, options: dict):
    from specdec_check.checker.ragged.caller import casts, ragged_inputs

    backend = _backend(options)
    logit_cast, law_rows, param_cast = casts(backend)
    draw = batch.scenario.draw(np.random.default_rng(batch.seed), logit_cast=logit_cast, law_rows=law_rows,
                               param_cast=param_cast)
    kwargs = ragged_inputs(backend, draw)
    before = {k: backend.copy(v) for k, v in kwargs.items() if v is not None}
    out = verify(**kwargs, generator=backend.generator(seed))
    mutated = [k for k in before if not backend.same(kwargs[k], before[k])]
    return draw, np.asarray(backend.to_host(out)), mutated


def ragged_contract(verify, *, batch: RaggedBatch, seed: int, alpha: float, options: dict) -> None:
    """Per request: at most ``n_i + 1`` tokens (drafts, then one token, then -1); greedy requests emit
    exactly greedy decoding's output; random requests emit no token of probability zero; inputs untouched."""
    from specdec_check.checker.chain.contract import ParsedStep, dropped_final, impossible_events
    from specdec_check.checker.ragged.block import RaggedBlock
    from specdec_check.checker.ragged.contract import check_ragged_output

    draw, out, mutated = _call(verify, batch, seed, options)
    s = batch.scenario
    body = (f"b = make_backend({options.get('backend') or 'numpy'!r}, device={options.get('device')!r}, "
            f"dtype={options.get('dtype')!r}); d = s.draw(np.random.default_rng({batch.seed})); "
            f"print(v(**ragged_inputs(b, d), generator=b.generator({seed})))")
    repro = _repro(verify, batch, seed, options, body)
    ev = {"batch": repr(batch), "seed": seed, "output": out.tolist()}
    if mutated:
        _fail(f"the verifier modified its input(s) {mutated} in place", ev, repro)
    problem, step = check_ragged_output(out, draw.draft_token_ids, draw.layout, s.vocab_size, s.describe_request)
    if problem is not None:
        _fail(problem[0], {**ev, **problem[1]}, repro)
    block = RaggedBlock(draw)
    if block.greedy.size:
        bad = np.flatnonzero((out[block.greedy] != block.greedy_expected).any(axis=1))
        if bad.size:
            i = int(block.greedy[bad[0]])
            _fail(f"{s.describe_request(i)}: greedy decoding emits {block.greedy_expected[bad[0]].tolist()} but the "
                  f"verifier emitted {out[i].tolist()}", ev, repro)
    tolerance = _backend(options).tolerance
    for group in block.groups:
        req = group.requests
        parsed = ParsedStep(step.accepted[req], step.final[req], step.emitted[req])
        vb = group.block
        events = [dropped_final(parsed, vb.draw.draft_token_ids, out[req, : group.n + 1])] + impossible_events(
            parsed, vb.draw.draft_token_ids, vb.draw.draft_probs, vb.draw.target_probs, tolerance=tolerance)
        for event in events:
            if event is not None:
                i = int(req[event[1]["row"]])
                _fail(f"{s.describe_request(i)}: {event[0]}", {**ev, **event[1], "request": i}, repro)


def ragged_determinism(verify, *, batch: RaggedBatch, seed: int, alpha: float, options: dict) -> None:
    """Two calls from the same generator state on the same call give the same output."""
    _, first, _ = _call(verify, batch, seed, options)
    _, second, _ = _call(verify, batch, seed, options)
    if first.shape != second.shape or not np.array_equal(first, second):
        _fail("two calls with the same generator state gave different outputs: the verifier draws randomness other "
              "than from its generator", {"batch": repr(batch), "seed": seed, "first": first.tolist(),
                                          "second": second.tolist()},
              _repro(verify, batch, seed, options, "print('call it twice with the same seed')"))


def ragged_laws(verify, *, batch: RaggedBatch, seed: int, alpha: float, options: dict) -> None:
    """The random requests' outputs follow their processed laws (quick mode, this example's alpha)."""
    from specdec_check.checker import check_ragged_verifier

    s = batch.scenario
    if not len(s.random_requests):
        return
    checks = [c for c in LAW_CHECKS if s.gamma or c == "first_token"]
    report = check_ragged_verifier(verify, scenarios=[s], mode=MODE, checks=checks, seed=seed, alpha=alpha,
                                   **_checker_options(options, kind="ragged_verifier"))
    note(f"ragged_laws: {batch!r} seed={seed} alpha={alpha:.3g} verdict={report.verdict}")
    if report.failures:
        body = (f"print(check_ragged_verifier(v, scenarios=[s], mode={MODE!r}, checks={checks!r}, seed={seed}, "
                f"alpha={alpha!r}{_options_src(options, kind='ragged_verifier')}).summary())")
        evidence = {"batch": repr(batch), "seed": seed, "alpha": f"{alpha:.3g}"}
        _fail(f"{_name(verify)} fails the ragged law property", evidence, _repro(verify, batch, seed, options, body),
              report.failures)


def _batches(**kw):
    def strategies(options: dict) -> dict:  # ragged calls have no degenerate domain: 0 drafts is in the contract
        return {"batch": ragged_batches(**kw), "seed": seeds()}

    return strategies


RAGGED_PROPERTIES = {
    p.name: p for p in [
        RaggedProperty("contract", "ragged_verifier", False, ragged_contract, _batches(),
                       "the per-request output contract, greedy requests exactly, no impossible token"),
        RaggedProperty("determinism", "ragged_verifier", False, ragged_determinism, _batches(max_requests=4),
                       "determinism for a fixed generator state"),
        RaggedProperty("laws", "ragged_verifier", True, ragged_laws,
                       _batches(max_requests=4, max_draft_tokens=3, vocab_sizes=None, greedy=None),
                       "random requests follow their processed target laws"),
    ]
}
