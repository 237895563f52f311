"""The token-sampler catalogue: kernels one change away from exact, each reproducing a reported bug class, the
draft's own samplers, and exact controls written differently from the reference.

Every sampler here takes the reference's keywords (``logits, temperature, top_k, top_p, min_p, indices,
generator``: :data:`~specdec_check.samplers._token_numpy.NUMPY_TOKEN_PROCESSING`) unless its ``processing``
says otherwise; ``specdec-check mutants --token-samplers`` runs them all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..exact._token_law import TokenProcessing
from ..samplers._token_numpy import NUMPY_TOKEN_PROCESSING, _distinct
from ..scenarios._token import round_to_dtype
from ._entry import NO_REPORT, KindEntry

__all__ = ["TOKEN_BUGS", "TOKEN_CONTROLS", "TokenEntry", "token_catalogue", "token_entry_tv", "token_mutation_score"]

#: Declared by the FlashInfer-style kernels: a total order on (probability, token index), exactly k kept.
INDEX_TIES = TokenProcessing(order=("temperature", "top_k", "top_p", "min_p"), ties="low_index", indices=True)


def _softmax(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def _law(z, t, k, p, m, mutation):
    """One row's law after temperature, top-k, top-p and min-p (ties kept), with ``mutation`` applied."""
    vocab = z.size
    if t == 0:
        law = np.zeros(vocab)
        law[vocab - 1 - int(np.argmax(z[::-1])) if mutation == "greedy_last_max" else int(np.argmax(z))] = 1.0
        return law
    raw = _softmax(z)
    z = raw / t if mutation == "temperature_on_probs" else z / t  # the bug divides probabilities, then softmaxes
    tempered = _softmax(z)  # the law at the temperature, before any filter
    for step in (("top_p", "top_k") if mutation == "top_k_after_top_p" else ("top_k", "top_p")):
        if step == "top_k" and 0 < k < vocab:
            if mutation in ("index_order", "top_k_off_by_one"):
                order = np.lexsort((np.arange(vocab), -z))  # rank, ties to the lowest index
                keep = np.zeros(vocab, dtype=bool)
                keep[order[:k + (mutation == "top_k_off_by_one")]] = True
            else:
                keep = z >= np.sort(z)[vocab - k]  # every token tied with the k-th is kept
            z = np.where(keep, z, -np.inf)
        if step == "top_p" and p < 1.0:
            probs = _softmax(z)
            desc = np.sort(probs)[::-1]
            if mutation == "index_order":  # the nucleus as a prefix of the (probability, lowest index) order
                order = np.lexsort((np.arange(vocab), -probs))
                before = np.cumsum(probs[order]) - probs[order]
                keep = np.zeros(vocab, dtype=bool)
                keep[order[:np.count_nonzero(before < p)]] = True
            elif mutation == "top_p_unsorted":
                keep = (np.cumsum(probs) - probs) < p  # mass before it in token order, not in rank
            elif mutation == "top_p_float16_cumsum":
                half = desc.astype(np.float16)
                cum = np.cumsum(half, dtype=np.float16)
                keep = probs >= float(half[np.count_nonzero((cum - half) < np.float16(p)) - 1])
            elif mutation == "top_p_exclusive":  # drops the token whose mass crosses top_p
                keep = probs >= desc[max(1, np.count_nonzero(np.cumsum(desc) <= p)) - 1]
            else:
                keep = probs >= desc[np.count_nonzero(np.cumsum(desc) - desc < p) - 1]
            z = np.where(keep, z, -np.inf)
    probs = _softmax(z)
    if m > 0:
        if mutation == "min_p_after_inplace_renorm":  # the threshold of the law before top-k/top-p (SGLang #15648)
            keep = probs >= m * tempered.max()
        elif mutation == "min_p_before_temperature":
            keep = (raw >= m * raw.max()) & (probs > 0)
        else:
            keep = probs >= m * probs.max()
        probs = np.where(keep, probs, 0.0)
        probs /= probs.sum()
    return probs


def _kernel(mutation, sampling="inverse_cdf"):
    """A token sampler with the reference's keywords whose law is :func:`_law` under ``mutation``."""

    def sample(*, logits, temperature, top_k, top_p, min_p, indices, generator):
        indices = np.asarray(indices, dtype=np.int64)
        temperature, top_k = np.asarray(temperature, dtype=np.float64), np.asarray(top_k)
        top_p, min_p = np.asarray(top_p, dtype=np.float64), np.asarray(min_p, dtype=np.float64)
        if mutation == "param_from_index_row":  # FlashInfer #5346: a row's parameters read at indices[i]
            top_k, min_p = top_k[indices % top_k.size], min_p[indices % min_p.size]
        rows, params, which = _distinct(indices, [temperature, top_k.astype(np.float64), top_p, min_p])
        table = np.asarray(logits, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):  # a bug may mask every token: its law is then NaN
            laws = np.stack([_law(table[int(r)], t, int(k), p, m, mutation) for r, (t, k, p, m) in zip(rows, params)])
        return _draw(laws, which, generator, sampling)

    return sample


def _draw(laws, which, generator, sampling):
    """One token per output from its row of ``laws``: inverse CDF (one uniform each, or one shared by every
    output: ``shared_uniform``), Gumbel-max over each row's support, or the exponential race."""
    n, vocab = which.size, laws.shape[1]
    if sampling in ("inverse_cdf", "shared_uniform", "sorted_inverse_cdf"):
        u = generator.random(n) if sampling != "shared_uniform" else np.full(n, generator.random())
        out = np.empty(n, dtype=np.int64)
        for j in range(laws.shape[0]):
            at = np.flatnonzero(which == j)
            if sampling == "sorted_inverse_cdf":  # most probable first: a different walk of the same law
                order = np.argsort(-laws[j], kind="stable")
                cdf = np.cumsum(laws[j][order])
                pos = np.minimum(np.searchsorted(cdf, u[at] * cdf[-1], side="right"), vocab - 1)
                out[at] = order[pos]
            else:
                cdf = np.cumsum(laws[j])
                out[at] = np.minimum(np.searchsorted(cdf, u[at] * cdf[-1], side="right"), vocab - 1)
        return out
    out = np.empty(n, dtype=np.int64)
    for j in range(laws.shape[0]):
        at = np.flatnonzero(which == j)
        support = np.flatnonzero(laws[j] > 0)
        if sampling == "gumbel_max":
            g = generator.gumbel(size=(at.size, support.size))
            out[at] = support[np.argmax(np.log(laws[j][support]) + g, axis=1)]
        else:  # exponential race: argmax p / E, E ~ Exp(1)
            e = generator.exponential(size=(at.size, support.size))
            out[at] = support[np.argmax(laws[j][support] / e, axis=1)]
    return out


def _make(name, mutation, doc, *, sampling="inverse_cdf", processing=NUMPY_TOKEN_PROCESSING):
    sample = _kernel(mutation, sampling)
    sample.__name__ = sample.__qualname__ = name
    sample.__module__ = __name__
    sample.__doc__ = doc
    sample.processing = processing
    sample.mutation = mutation
    globals()[name] = sample
    return sample


def token_entry_tv(entry, scenario) -> float | None:
    """The exact TV between ``entry``'s output law on ``scenario`` (rows chosen uniformly) and the exact processed
    law: the mean over rows of each row's TV, from the kernel's own law (:func:`_law`). None where the law is
    not a function of the row alone (parameters read through indices, a shared uniform: exact marginals)."""
    mutation = getattr(entry.sampler, "mutation", "")
    if entry.kind != "token_sampler" or mutation == "param_from_index_row" or entry.name == "one_uniform_for_the_batch":
        return None
    laws = scenario.laws()
    params = {k: scenario.params.get(k, np.full(scenario.rows, v)) for k, v in
              (("temperature", 1.0), ("top_k", 0), ("top_p", 1.0), ("min_p", 0.0))}
    tvs = []
    with np.errstate(invalid="ignore", divide="ignore"):
        for r in range(scenario.rows):
            if laws.ambiguous[r]:
                continue
            bug = _law(scenario.values[r], float(params["temperature"][r]), int(params["top_k"][r]),
                       float(params["top_p"][r]), float(params["min_p"][r]), mutation)
            bug = np.nan_to_num(bug)
            tvs.append(0.5 * np.abs(bug - laws.law[r]).sum())
    return float(np.mean(tvs)) if tvs else None


# --------------------------------------------------------------------------- the draft's own sampler

def _draft(name, doc, how):
    """A drafter's sampler: ``(tokens, q)`` from logits and a temperature per output; ``how`` says what it
    samples from and what it returns."""

    def sample_draft(*, logits, temperature, generator):
        z = np.asarray(logits, dtype=np.float64)
        t = np.asarray(temperature, dtype=np.float64)[:, None]
        q = np.exp((z - z.max(axis=1, keepdims=True)) / t)
        q /= q.sum(axis=1, keepdims=True)
        if how == "bf16":  # DeepSpec #31: the token from bf16 logits, q from the float32 ones
            zb = round_to_dtype(z.astype(np.float32), "bfloat16")
            law = np.exp((zb - zb.max(axis=1, keepdims=True)) / t)
        elif how == "top_k":  # transformers #47932: the token from top-k processed logits, q the raw softmax
            kth = np.sort(z, axis=1)[:, -20][:, None]
            law = np.where(z >= kth, q, 0.0)
        else:
            law = q
        cdf = np.cumsum(law, axis=1)
        u = generator.random(z.shape[0])[:, None] * cdf[:, -1:]
        tokens = np.minimum((cdf <= u).sum(axis=1), z.shape[1] - 1)
        return tokens, q.astype(np.float32)

    sample_draft.__name__ = sample_draft.__qualname__ = name
    sample_draft.__module__ = __name__
    sample_draft.__doc__ = doc
    globals()[name] = sample_draft
    return sample_draft


@dataclass(frozen=True)
class TokenEntry(KindEntry):
    """One catalogued token sampler (``kind`` "token_sampler") or drafter's sampler ("draft_sampler"):
    ``expected`` "failure" (a bug) or "pass" (an exact control)."""

    kind: str = "token_sampler"

    def report(self, mode: str, seed: int):
        """The checker's report on this entry, under the processing its sampler declares."""
        from ..checker import check_draft_consistency, check_token_sampler

        check = check_draft_consistency if self.kind == "draft_sampler" else check_token_sampler
        return check(self.sampler, mode=mode, seed=seed)


def _bug(name, mutation, mechanism, source, **kwargs):
    return TokenEntry(name, _make(name, mutation, mechanism, **kwargs), mechanism, source)


TOKEN_BUGS = (
    _bug("top_k_keeps_boundary_ties", "top_k_keeps_ties",
         "Declares a total order on (probability, index), exactly k kept, but keeps every token tied with the k-th: "
         "[0.4, 0.3, 0.3, 0] at k = 2 keeps three tokens.",
         "flashinfer-ai/flashinfer#3774 (top-k/top-p rejection sampling accepted a token tied with the boundary)",
         processing=INDEX_TIES),
    _bug("parameters_from_the_reused_row", "param_from_index_row",
         "With rows reused through indices, output i reads top_k and min_p at indices[i] (the row of the logits) "
         "instead of i (the output's own request).",
         "flashinfer-ai/flashinfer#5346 (per-row top-k / min-p read from the wrong row when indices reuse rows)"),
    _bug("min_p_after_in_place_renormalisation", "min_p_after_inplace_renorm",
         "Top-k/top-p renormalise the law in place, then min-p compares it with a threshold taken from the law "
         "before them: more tokens pass min-p than the declared order keeps.",
         "sgl-project/sglang#15648 (renormalisation in place before min-p)"),
    _bug("top_p_on_unsorted_probabilities", "top_p_unsorted",
         "The nucleus is the prefix of tokens in vocabulary order whose mass reaches top_p, not the most probable "
         "ones: the cumulative sum skipped the sort.", NO_REPORT + " (a classic of hand-written top-p)"),
    _bug("top_k_after_top_p", "top_k_after_top_p",
         "Applies top-p before top-k while declaring top-k then top-p (the nucleus of the whole law, then the k "
         "largest of it): rows with both set keep a different set.",
         "vllm-project/vllm#26859 (FlashInfer top-k/top-p sampler disabled by default after correctness reports)"),
    _bug("temperature_after_softmax", "temperature_on_probs",
         "Divides the probabilities (not the logits) by the temperature and softmaxes again.", NO_REPORT),
    _bug("min_p_before_temperature", "min_p_before_temperature",
         "Computes the min-p mask on the law at temperature 1 while declaring min-p after the temperature.",
         NO_REPORT + " (min-p's position relative to temperature differs between frameworks)"),
    _bug("top_p_float16_cumulative_sum", "top_p_float16_cumsum",
         "Accumulates the sorted probabilities in float16: the running sum stalls below top_p on long tails "
         "(0.95 over 500 tokens), so the nucleus boundary moves.", NO_REPORT + " (half-precision top-p kernels)"),
    _bug("top_p_drops_the_crossing_token", "top_p_exclusive",
         "Keeps the tokens whose cumulative mass including themselves is at most top_p: the token that crosses "
         "top_p is dropped (the nucleus holds less than top_p).", NO_REPORT + " (off by one at the boundary)"),
    _bug("top_k_keeps_one_more", "top_k_off_by_one", "Keeps k + 1 tokens.", NO_REPORT + " (off by one)"),
    _bug("greedy_takes_the_last_maximum", "greedy_last_max",
         "Greedy rows take the last of tied maxima, where the declared rule (argmax) takes the first.", NO_REPORT),
    _bug("one_uniform_for_the_batch", None,
         "One uniform is drawn for the whole call and every output inverts it: each output's law is exact, the "
         "outputs are not independent.", NO_REPORT + " (a shared random buffer)", sampling="shared_uniform"),
)

DRAFT_BUGS = (
    TokenEntry("draft_sampled_from_bf16_logits",
               _draft("draft_sampled_from_bf16_logits", "Samples the draft token from bf16 logits, returns the "
                      "float32 softmax as q.", "bf16"),
               "The drafter samples its token from the logits rounded to bf16 while the verifier is given the "
               "float32 softmax: at temperature 0.3 and logits of magnitude ~60 the two laws are ~0.1 apart in TV.",
               "deepseek-ai/DeepSpec#31", kind="draft_sampler"),
    TokenEntry("draft_processed_but_raw_q",
               _draft("draft_processed_but_raw_q", "Samples the draft token after top-k 20, returns the raw softmax "
                      "as q.", "top_k"),
               "The drafter samples from its processed logits (top-k) but hands the verifier the raw softmax.",
               "huggingface/transformers#47932", kind="draft_sampler"),
)

TOKEN_CONTROLS = (
    TokenEntry("control_gumbel_max", _make("control_gumbel_max", None, "Exact: Gumbel-max over each law's support.",
                                           sampling="gumbel_max"),
               "argmax(log p + G), G ~ Gumbel(0, 1), over the tokens the processing keeps.", "Gumbel-max trick",
               "pass"),
    TokenEntry("control_exponential_race", _make("control_exponential_race", None,
                                                 "Exact: argmax(p / E), E ~ Exp(1).", sampling="exponential_race"),
               "The exponential race (vLLM's and FlashInfer's no-sort sampling).", "vLLM v1 random_sample", "pass"),
    TokenEntry("control_sorted_inverse_cdf", _make("control_sorted_inverse_cdf", None,
                                                   "Exact: inverse CDF over the sorted law.",
                                                   sampling="sorted_inverse_cdf"),
               "Inverse CDF walking the law from its most probable token.", "sorted sampling (HF-style)", "pass"),
    TokenEntry("control_exact_k_index_order", _make("control_exact_k_index_order", "index_order",
                                                    "Exact under ties='low_index': exactly k kept, and the nucleus a "
                                                    "prefix of the order, lowest index first.",
                                                    processing=INDEX_TIES),
               "Exactly k tokens and a nucleus cut in the (probability, lowest index) order, as declared.",
               "flashinfer-ai/flashinfer#3774's fix (a total order on probability, then index)", "pass"),
    TokenEntry("control_draft_consistent", _draft("control_draft_consistent", "Samples from q and returns q.", None),
               "The drafter samples from the law it returns.", "-", "pass", kind="draft_sampler"),
)


def token_catalogue() -> tuple:
    """Every token-sampler entry: the bugs, the drafter bugs, then the exact controls."""
    return TOKEN_BUGS + DRAFT_BUGS + TOKEN_CONTROLS


def token_mutation_score(mode: str = "default", *, seed: int = 0, names=None, progress=None):
    """Run the checker on every token-sampler entry (or those named): a :class:`~specdec_check.bugs.MutationScore`."""
    from ._score import score_entries

    return score_entries(token_catalogue(), mode, seed=seed, names=names, progress=progress,
                         what="token-sampler catalogue")


__all__ += [e.name for e in token_catalogue()]  # every sampler is reachable as specdec_check.bugs:<name>
