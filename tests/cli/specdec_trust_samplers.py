"""Samplers and scenario lists for the trust tests (issue 14), importable by the CLI as
``specdec_trust_samplers:NAME`` (tests/cli is on the subprocess's PYTHONPATH).

- three exact verifiers written independently of the reference, none of which guards NaN rows;
- the reference writing into one static output buffer (a CUDA-graph output);
- the reference followed by a write into its input around the read-only flag;
- a vocabulary of 152,064 (Qwen2) with one row per call, where evidence is thin;
- a scenario whose name needs shell quoting, and a ``functools.partial`` sampler;
- a decode loop that reaches the target only through ``last_probs`` and ``start_probs``.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from specdec_check.bugs import resample_from_target
from specdec_check.models import HashedMarkovModel, mix
from specdec_check.samplers import numpy_verify
from specdec_check.scenarios import VerifierScenario, default_verifier_battery

#: Qwen2's vocabulary: the size at which a one-row-per-call scenario gave PASSED on thin evidence.
QWEN2_VOCAB = 152_064
#: A scenario name that is wrong in every shell unless quoted.
ODD_NAME = "it's $HOME; \"a b\" `x`"


def _gathered(draft_token_ids, draft_probs, target_probs):
    gamma = draft_token_ids.shape[1]
    idx = draft_token_ids[..., None]
    return (np.take_along_axis(target_probs[:, :gamma], idx, axis=2)[..., 0],
            np.take_along_axis(draft_probs, idx, axis=2)[..., 0])


def _final_law(draft_probs, target_probs, stop):
    """Each row's law of the final token: the normalised residual where a draft was rejected (k < gamma),
    the target row at k = gamma (Leviathan et al. 2023, Algorithm 1), unnormalised."""
    batch, gamma = draft_probs.shape[:2]
    rows = np.arange(batch)
    target = target_probs[rows, stop]
    if gamma == 0:
        return target
    draft = draft_probs[rows, np.minimum(stop, gamma - 1)]
    return np.where((stop < gamma)[:, None], np.maximum(target - draft, 0.0), target)


def _emit(draft_token_ids, stop, final):
    batch, gamma = draft_token_ids.shape
    out = np.full((batch, gamma + 1), -1, dtype=np.int64)
    out[:, :gamma] = np.where(np.arange(gamma) < stop[:, None], draft_token_ids, -1)
    out[np.arange(batch), stop] = final
    return out


def inverse_cdf_verify(*, draft_token_ids, draft_probs, target_probs, generator):
    """Exact: accept while ``u q(x) <= p(x)``, then invert the unnormalised final law's CDF. A NaN row
    accepts nothing and inverts to token 0: it emits a token silently."""
    batch, gamma = draft_token_ids.shape
    p_x, q_x = _gathered(draft_token_ids, draft_probs, target_probs)
    ok = generator.random((batch, gamma)) * q_x <= p_x
    stop = np.where(ok.all(axis=1), gamma, np.argmin(ok, axis=1)) if gamma else np.zeros(batch, dtype=np.int64)
    law = _final_law(draft_probs, target_probs, stop)
    cdf = np.cumsum(law, axis=1)
    final = np.minimum((cdf < generator.random(batch)[:, None] * cdf[:, -1:]).sum(axis=1), law.shape[1] - 1)
    return _emit(draft_token_ids, stop, final)


def gumbel_verify(*, draft_token_ids, draft_probs, target_probs, generator):
    """Exact: accept with probability ``min(1, p/q)`` by ``log u < log p - log q``, the final token by
    Gumbel-max over the log law (Gumbel 1954). A NaN row picks its first NaN entry: token 0."""
    batch, gamma = draft_token_ids.shape
    p_x, q_x = _gathered(draft_token_ids, draft_probs, target_probs)
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = np.log(generator.random((batch, gamma))) < np.log(p_x) - np.log(q_x)
        stop = np.where(ok.all(axis=1), gamma, np.argmin(ok, axis=1)) if gamma else np.zeros(batch, dtype=np.int64)
        law = _final_law(draft_probs, target_probs, stop)
        final = np.argmax(np.log(law) + generator.gumbel(size=law.shape), axis=1)
    return _emit(draft_token_ids, stop, final)


def searchsorted_verify(*, draft_token_ids, draft_probs, target_probs, generator):
    """Exact: accept by ``u < p/q``; the final token by one ``searchsorted`` over all rows' CDFs laid end
    to end (row ``b`` offset by ``b``). A NaN row's CDF is NaN: the search lands on some token silently."""
    batch, gamma = draft_token_ids.shape
    p_x, q_x = _gathered(draft_token_ids, draft_probs, target_probs)
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = generator.random((batch, gamma)) < p_x / q_x
    stop = np.where(ok.all(axis=1), gamma, np.argmin(ok, axis=1)) if gamma else np.zeros(batch, dtype=np.int64)
    law = _final_law(draft_probs, target_probs, stop)
    vocab = law.shape[1]
    with np.errstate(invalid="ignore"):
        cdf = np.cumsum(law, axis=1) / law.sum(axis=1, keepdims=True)
    cdf = np.minimum(cdf, 1.0) + np.arange(batch)[:, None]  # strictly increasing across rows
    where = np.searchsorted(cdf.reshape(-1), np.arange(batch) + generator.random(batch), side="right")
    final = np.clip(where - np.arange(batch) * vocab, 0, vocab - 1)
    return _emit(draft_token_ids, stop, final)


class StaticBuffer:
    """The reference, returning its tokens in one buffer it reuses on every call (as a captured CUDA
    graph returns its static output tensor)."""

    def __init__(self):
        self.buffer = None

    def __call__(self, **kwargs):
        out = numpy_verify(**kwargs)
        if self.buffer is None or self.buffer.shape != out.shape:
            self.buffer = np.empty_like(out)
        self.buffer[...] = out
        return self.buffer


static_buffer_verify = StaticBuffer()


def sneaky_write_verify(*, draft_token_ids, draft_probs, target_probs, generator):
    """The reference, then a write into ``target_probs`` around the read-only flag."""
    out = numpy_verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                       generator=generator)
    base = target_probs
    while isinstance(base.base, np.ndarray):  # the writable array the read-only view was made from
        base = base.base
    base.setflags(write=True)
    base.reshape(-1)[:1] = base.reshape(-1)[:1] * 0.5
    return out


def qwen2_one_row():
    """One scenario at V = 152,064 with one row per call: a few samples per law test at most."""
    target = HashedMarkovModel.random(QWEN2_VOCAB, num_prototypes=8, seed=1)
    draft = mix(target, HashedMarkovModel.random(QWEN2_VOCAB, num_prototypes=8, seed=2), 0.6)
    return [VerifierScenario("qwen2-one-row", target, draft, 2, 1, seed=99)]


def odd_name():
    """The corpus-bigram scenario under a name that needs shell quoting."""
    (scenario,) = [s for s in default_verifier_battery() if s.name == "corpus-bigram"]
    return [dataclasses.replace(scenario, name=ODD_NAME)]


partial_resample_from_target = functools.partial(resample_from_target)


def last_probs_generate(*, target, draft, prompts, max_new_tokens, gamma, generator):
    """Exact but not speculative: every token drawn from ``target.last_probs`` (``start_probs`` after an
    empty context), one target pass per token, and the draft never used."""
    prompts = np.asarray(prompts)
    out = np.empty((prompts.shape[0], max_new_tokens), dtype=np.int64)
    for b, prompt in enumerate(prompts):
        context = [int(t) for t in prompt if t >= 0]
        for t in range(max_new_tokens):
            law = target.last_probs(np.array([context]))[0] if context else target.start_probs()
            out[b, t] = context_token = int(np.searchsorted(np.cumsum(law), generator.random() * law.sum(),
                                                            side="right").clip(max=law.size - 1))
            context.append(context_token)
    return out
