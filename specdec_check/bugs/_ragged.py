"""Production bugs of ragged verifiers (the vLLM v1 calling convention), each one change away from exact.

Every sampler here runs one numpy kernel, :func:`_ragged_kernel`, which mirrors
:func:`specdec_check.samplers.numpy_ragged_verify` (recovered and bonus tokens by vLLM's exponential
race, ``argmax(w / E)``) with one ``mutation`` switched on; with none it is exact (the control
``ragged_exponential_race``). :data:`RAGGED_BUGS` lists them with mechanism and source;
:func:`ragged_catalogue` and :func:`ragged_mutation_score` run the ragged checker on them, apart from
the chain catalogue (whose score they leave unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..samplers._ragged_numpy import _processed, _softmax, check_ragged_args
from ._entry import NO_REPORT, KindEntry

__all__ = ["RAGGED_BUGS", "RAGGED_CONTROLS", "RaggedEntry", "ragged_catalogue", "ragged_mutation_score"]

#: The mutations :func:`_ragged_kernel` knows (None: exact).
MUTATIONS = (
    "temperature_ignored", "temperature_twice", "filters_only_in_residual", "top_p_not_renormalised",
    "greedy_as_random", "random_as_greedy", "bonus_row_off_by_one", "zero_draft_reads_neighbour",
    "no_draft_probs_as_uniform",
)


def _ragged_kernel(args, generator, mutation=None):
    """One ragged step (Leviathan et al. 2023, Algorithm 1 per random request; greedy decoding for
    temperature 0), with at most one of :data:`MUTATIONS`."""
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a numpy.random.Generator; got {type(generator).__name__}.")
    ids, lay, draft_probs, logits, temperature, top_k, top_p, _ = check_ragged_args(*args)
    batch, width, vocab, total = lay.batch, lay.width, logits.shape[1], lay.num_drafts
    order = ("temperature", "top_k", "top_p")
    greedy = temperature == 0
    if mutation == "greedy_as_random":  # the greedy sentinel is not recognised: temperature 0 becomes 1
        temperature = np.where(greedy, 1.0, temperature)
        greedy = np.zeros(batch, dtype=bool)
    if mutation == "random_as_greedy" and greedy.any():  # "all greedy" computed as "any greedy"
        greedy = np.ones(batch, dtype=bool)
    temp = np.where(greedy, 1.0, temperature)
    if mutation == "temperature_ignored":
        temp = np.ones(batch)
    elif mutation == "temperature_twice":
        temp = temp * temp
    req = lay.row_request
    law = _processed(logits, temp[req], top_k[req], top_p[req], None, order)
    accept_law = law
    if mutation == "filters_only_in_residual":
        accept_law = _softmax(logits / temp[req][:, None])
    elif mutation == "top_p_not_renormalised":  # top-p zeroes probabilities after top-k and keeps the rest as they are
        after_top_k = _processed(logits, temp[req], top_k[req], np.ones(req.size), None, order)
        law = accept_law = np.where(law > 0, after_top_k, 0.0)
    if draft_probs is None:
        q_rows = np.full((total, vocab), 1.0 / vocab) if mutation == "no_draft_probs_as_uniform" else None
    else:
        q_rows = draft_probs
    uniforms = generator.random(total)
    rows = lay.draft_row
    argmax = logits.argmax(axis=1)
    q_x = np.ones(total) if q_rows is None else q_rows[np.arange(total), ids]
    accepted = np.where(greedy[lay.draft_request], ids == argmax[rows], uniforms * q_x < accept_law[rows, ids])
    rejected = np.ones((batch, width), dtype=bool)
    rejected[lay.draft_request, lay.draft_position] = ~accepted
    stop = rejected.argmax(axis=1)
    final_row = lay.row_start + stop
    if mutation == "bonus_row_off_by_one":  # bonus index cu_num_draft_tokens[i] + i - 1 after the first request
        late = (np.arange(batch) > 0) & (stop == lay.num_draft_tokens)
        final_row = np.where(late, final_row - 1, final_row)
    elif mutation == "zero_draft_reads_neighbour":  # positions counted as max(n, 1): row_start + 1 when n = 0
        final_row = np.where(lay.num_draft_tokens == 0, np.minimum(final_row + 1, lay.num_rows - 1), final_row)
    weights = law[final_row].copy()
    recover = stop < lay.num_draft_tokens
    if recover.any() and total:
        flat = lay.draft_start[recover] + stop[recover]
        if q_rows is None:
            weights[np.flatnonzero(recover), ids[flat]] = 0.0
        else:
            weights[recover] = np.maximum(weights[recover] - q_rows[flat], 0.0)
    noise = generator.exponential(size=(batch, vocab))
    with np.errstate(divide="ignore", invalid="ignore"):
        keys = np.where(weights > 0, weights / noise, -np.inf)
    token = np.where(greedy, argmax[final_row], keys.argmax(axis=1))
    out = np.full((batch, width), -1, dtype=np.int64)
    if width > 1:
        out[:, : width - 1] = np.where(np.arange(width - 1) < stop[:, None], lay.padded(ids, -1), -1)
    out[np.arange(batch), stop] = token
    return out


def _make(name: str, mutation, doc: str):
    def verify(*, draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k, top_p, generator):
        return _ragged_kernel((draft_token_ids, num_draft_tokens, draft_probs, target_logits, temperature, top_k,
                               top_p), generator, mutation)

    verify.__name__ = verify.__qualname__ = name
    verify.__module__ = __name__
    verify.__doc__ = doc
    globals()[name] = verify
    return verify


@dataclass(frozen=True)
class RaggedEntry(KindEntry):
    """One catalogued ragged verifier: ``expected`` "failure" (a bug) or "pass" (an exact control)."""

    kind: str = "ragged_verifier"

    def report(self, mode: str, seed: int):
        """The checker's report on this entry (the production logits-in layout, standard rule)."""
        from ..checker import check_ragged_verifier

        return check_ragged_verifier(self.sampler, mode=mode, seed=seed)


def _bug(name, mutation, mechanism, source):
    return RaggedEntry(name, _make(name, mutation, mechanism), mechanism, source)


RAGGED_BUGS = (
    _bug("ragged_temperature_ignored", "temperature_ignored",
         "The target rows are processed at temperature 1 whatever the request's temperature (top-k/top-p still "
         "applied): the law of every random request with temperature != 1 is wrong.",
         "ohdearquant/lattice#388 (PR #974: the MTP rejection verifier softmaxed raw logits with no temperature)"),
    _bug("ragged_temperature_twice", "temperature_twice",
         "The logits are divided by the temperature twice (once by the caller, once inside the sampler).",
         "RL-Align/RL-Kernel#81 (temperature applied twice in the FlashInfer sampling path)"),
    _bug("ragged_filters_only_in_residual", "filters_only_in_residual",
         "Top-k/top-p are applied to the target for the residual and the bonus token, but the acceptance ratio "
         "p(x)/q(x) reads the unfiltered softmax(logits / T).",
         NO_REPORT + " (related: vllm-project/vllm#9834 / PR #10198, sampling parameters missing from the target "
                     "probabilities of the rejection sampler)"),
    _bug("ragged_top_p_not_renormalised", "top_p_not_renormalised",
         "Top-p zeroes the probabilities outside the nucleus but does not renormalise the rest: the acceptance "
         "ratio and the residual use a target law that sums to less than 1.",
         "facebookresearch/fairseq PR #882; ml-explore/mlx-lm PR #388 (top-p assumed a law summing to 1)"),
    _bug("ragged_greedy_as_random", "greedy_as_random",
         "Greedy requests are not recognised (the greedy temperature sentinel changed from -1 to 0): their "
         "temperature 0 is replaced by 1 and they are sampled like random requests.",
         "vllm-project/vllm PR #27077 (greedy temperature detection after the sampler refactor)"),
    _bug("ragged_random_as_greedy", "random_as_greedy",
         "In a batch mixing greedy and random requests, 'all greedy' is computed as 'any greedy': every request goes "
         "down the greedy (argmax) path.", NO_REPORT),
    _bug("ragged_bonus_row_off_by_one", "bonus_row_off_by_one",
         "The bonus row of every request after the first is read one row early (index cu_num_draft_tokens[i] + i - 1, "
         "an inclusive/exclusive cumulative-sum mix-up): its bonus token comes from its last draft's row, or from the "
         "previous request's bonus row when it has no drafts.", NO_REPORT),
    _bug("ragged_zero_draft_reads_neighbour", "zero_draft_reads_neighbour",
         "A request with no drafts takes its token from the next request's first row (its positions counted as "
         "max(num_draft_tokens, 1)).", NO_REPORT),
    _bug("ragged_no_draft_probs_as_uniform", "no_draft_probs_as_uniform",
         "With draft_probs=None (n-gram / EAGLE top-1 drafters) the drafts are treated as drawn from the uniform law "
         "q = 1/V instead of one-hot: they are accepted with probability min(1, V p(x)).",
         NO_REPORT + " (vLLM's no-draft-probs mode treats them as one-hot; peers.md, 1.3)"),
)

RAGGED_CONTROLS = (
    RaggedEntry("ragged_exponential_race", _make("ragged_exponential_race", None,
                                                 "The kernel of the catalogue with no mutation: exact."),
                "Exact ragged verifier: acceptance u q < p; recovered and bonus tokens by one Exp(1) race per request, "
                "argmax(w / E).", "vLLM v1 sample_recovered_tokens style", "pass"),
)


def ragged_catalogue() -> tuple:
    """Every ragged entry: the bugs, then the exact controls."""
    return RAGGED_BUGS + RAGGED_CONTROLS


def ragged_mutation_score(mode: str = "default", *, seed: int = 0, names=None, progress=None):
    """Run :func:`~specdec_check.checker.check_ragged_verifier` on every ragged entry (or those named):
    a :class:`~specdec_check.bugs.MutationScore` (its table: ``format_mutation_table``)."""
    from ._score import score_entries

    return score_entries(ragged_catalogue(), mode, seed=seed, names=names, progress=progress,
                         what="ragged catalogue")

__all__ += [e.name for e in RAGGED_BUGS + RAGGED_CONTROLS]  # every sampler is reachable as specdec_check.bugs:<name>
