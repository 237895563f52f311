"""The opt-in probe of a ragged verifier's sampling conventions at the boundaries the checker avoids.

:func:`~specdec_check.checker.check_ragged_verifier` draws logits with clear gaps at every top-k
and top-p boundary, so implementations that break ties or place a boundary differently all agree.
This probe puts requests exactly on such boundaries and reports what the verifier does:

- ``top_k_ties``: two tokens tie for the k-th largest logit: are both kept (vLLM's ``logits >=
  k-th value``) or exactly k (``torch.topk``)?
- ``top_p_crossing``: is the token whose mass crosses ``top_p`` kept (the smallest set reaching
  ``top_p``: vLLM, HF) or dropped (the largest set below ``top_p``)?
- ``top_k_top_p_order``: is top-p computed on the law left by top-k, renormalised (vLLM, FlashInfer
  "top_k_first"), or on the full law and intersected with top-k (SGLang's sort path)?
- ``temperature_before_top_p``: is top-p computed after dividing by the temperature (vLLM) or before?

Each probe call holds many identical requests with one one-hot draft on the boundary token
(``draft_probs=None``): a draft accepted at least once has positive probability on the acceptance
path; the recovered and bonus tokens seen are in the support of the sampling path. Every kept
token of a probe has probability at least 0.15, so over :data:`PROBE_REQUESTS` requests a kept
token is missed with probability below ``0.85^400 < 1e-28``: the answers are deterministic in practice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..._ragged_layout import ragged_layout
from ..._settings import DEFAULT_BACKEND, DEFAULT_SEED
from ..backends import make_backend
from .caller import ragged_inputs

__all__ = ["ConventionProbe", "ConventionReport", "PROBE_REQUESTS", "probe_sampling_conventions"]

#: Requests per probe call (each one sample of the acceptance path and one of the sampling path).
PROBE_REQUESTS = 400


@dataclass(frozen=True)
class ConventionProbe:
    """One probe: the question, the answer (one of ``answers``, "raised ..." or "unclear"), the evidence."""

    name: str
    question: str
    answer: str
    evidence: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ConventionReport:
    """What :func:`probe_sampling_conventions` found, one :class:`ConventionProbe` per question."""

    sampler: str
    probes: tuple

    def answers(self) -> dict:
        return {p.name: p.answer for p in self.probes}

    def summary(self) -> str:
        lines = [f"Sampling conventions of {self.sampler}:"]
        lines += [f"  {p.name}: {p.answer}  ({p.question})" for p in self.probes]
        return "\n".join(lines)


@dataclass(frozen=True)
class _Case:
    name: str
    question: str
    probs: tuple  # the law at temperature 1 (logits are its logs)
    temperature: float
    top_k: int
    top_p: float
    draft: int  # the boundary token drafted (one-hot)
    token: int  # the token whose presence answers the question
    present: str  # answer when ``token`` is kept
    absent: str  # answer when it is not


_CASES = (
    _Case("top_k_ties", "two tokens tie for the k-th largest logit (k = 2): kept both, or exactly k?",
          (0.5, 0.2, 0.2, 0.1), 1.0, 2, 1.0, draft=2, token=2,
          present="keeps every tied token (logits >= the k-th largest; vLLM)",
          absent="keeps exactly k tokens (ties broken by index, as torch.topk)"),
    _Case("top_p_crossing", "top_p = 0.6 falls inside the second token's mass (0.5 -> 0.8): is it kept?",
          (0.5, 0.3, 0.15, 0.05), 1.0, 0, 0.6, draft=1, token=1,
          present="keeps the token that crosses top_p (smallest set reaching top_p; vLLM, HF)",
          absent="drops the token that crosses top_p (largest set below top_p)"),
    _Case("top_k_top_p_order", "top_k = 2, top_p = 0.5 on (0.4, 0.3, 0.2, 0.1): is top-p taken on the top-k law?",
          (0.4, 0.3, 0.2, 0.1), 1.0, 2, 0.5, draft=1, token=1,
          present="top-p on the full law, intersected with top-k (SGLang's sort path)",
          absent="top-p on the law left by top-k, renormalised (vLLM; FlashInfer top_k_first)"),
    _Case("temperature_before_top_p", "temperature 2, top_p = 0.65 on (0.7, 0.2, 0.1): top-p before or after "
          "dividing by the temperature?", (0.7, 0.2, 0.1), 2.0, 0, 0.65, draft=1, token=1,
          present="divides by the temperature first (vLLM, HF)",
          absent="applies top-p to the logits before the temperature"),
)


def _call(verify, backend, case: _Case, seed: int):
    batch = PROBE_REQUESTS
    logits = np.tile(np.log(np.asarray(case.probs)), (2 * batch, 1))
    values = {"draft_token_ids": np.full(batch, case.draft, dtype=np.int64),
              "num_draft_tokens": np.ones(batch, dtype=np.int64), "draft_probs": None, "target_logits": logits,
              "temperature": np.full(batch, case.temperature), "top_k": np.full(batch, case.top_k, dtype=np.int64),
              "top_p": np.full(batch, case.top_p), "min_p": None}

    class _Draw:  # what ragged_inputs reads
        pass

    draw = _Draw()
    for name, value in values.items():
        setattr(draw, name, value)
    kwargs = ragged_inputs(backend, draw)
    kwargs.pop("min_p", None)
    return backend.to_host(verify(**kwargs, generator=backend.generator(seed)))


def probe_sampling_conventions(verify, *, backend=DEFAULT_BACKEND, device=None, dtype=None,
                               seed=DEFAULT_SEED) -> ConventionReport:
    """Report the boundary conventions of the ragged verifier ``verify`` (see the module docstring).

    Opt-in: the checker never depends on these conventions (its draws keep clear of every boundary).
    ``backend``/``device``/``dtype`` as for the checker; ``seed`` seeds the probe calls.
    """
    from ..core.callables import qualified_name

    backend = make_backend(backend, device=device, dtype=dtype)
    seeds = np.random.SeedSequence(seed).generate_state(len(_CASES), dtype=np.uint64)
    probes = []
    layout = ragged_layout(np.ones(PROBE_REQUESTS, dtype=np.int64))
    for case, s in zip(_CASES, seeds):
        try:
            out = _call(verify, backend, case, int(s) % (2**63))
        except Exception as exc:  # noqa: BLE001 - a verifier that refuses the boundary is an answer too
            probes.append(ConventionProbe(case.name, case.question, f"raised {type(exc).__name__}: {exc}"))
            continue
        if out.shape != (layout.batch, layout.width):
            probes.append(ConventionProbe(case.name, case.question, "unclear",
                                          {"problem": f"output shape {out.shape}, expected {(layout.batch, layout.width)}"}))
            continue
        accepted = int((out[:, 0] == case.draft).sum())
        seen = sorted(set(int(t) for t in out[out >= 0].tolist()))
        recovered = out[:, 0][out[:, 0] != case.draft]
        bonus = out[:, 1][out[:, 1] >= 0]
        kept_by_sampling = bool((recovered == case.token).any() or (bonus == case.token).any())
        kept_by_acceptance = case.token == case.draft and accepted > 0
        answer = case.present if (kept_by_acceptance or kept_by_sampling) else case.absent
        probes.append(ConventionProbe(case.name, case.question, answer, {
            "probs": list(case.probs), "temperature": case.temperature, "top_k": case.top_k, "top_p": case.top_p,
            "draft": case.draft, "drafts_accepted": accepted, "requests": PROBE_REQUESTS, "tokens_seen": seen,
            "kept_by_acceptance": kept_by_acceptance, "kept_by_sampling": kept_by_sampling}))
    return ConventionReport(qualified_name(verify), tuple(probes))
