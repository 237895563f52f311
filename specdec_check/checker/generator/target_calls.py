"""Target calls of a decode loop, judged per verification step against the exact expectation of speculative decoding."""

from __future__ import annotations

import math

import numpy as np

from ...exact import expected_target_calls
from ...models import last_token_probs
from ..core.kind import PlannedTest
from ..core.report import TestRecord
from ..checks.base import Check

__all__ = ["TargetCalls", "freedman_threshold", "judge_steps"]

#: Single-row runs of the target-call test: at least 50 (the bound's margin shrinks as 1/sqrt(m)),
#: at most 400 (a decode loop run per row is the slowest call the checker makes).
MIN_RUNS, MAX_RUNS = 50, 400
#: Variance grid of the stitched Freedman bound: v_j = 2^j, j < 48 (one alpha share per grid point;
#: 2^47 token^2 is far beyond any run's predictable variation).
VARIANCE_GRID = 48

#: The entry points of a counting model that compute laws (each is one forward pass).
_ENTRY_POINTS = ("last_probs", "start_probs", "probs_at", "cdf_at")


def _real(tokens):
    """The real (non ``-1``) tokens of a one-row token array as a tuple, or None when not one row."""
    if tokens is None:
        return None
    if hasattr(tokens, "detach"):
        tokens = tokens.detach().cpu().numpy()
    arr = np.asarray(tokens)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[0] != 1 or not np.issubdtype(arr.dtype, np.integer):
        return None
    return tuple(int(t) for t in arr[0] if t >= 0)


class _Recorder:
    """Passes every call through to a checker's counting model (which keeps counting) and logs, per
    law call, ``(role, the real tokens it conditions on)``; ``None`` for calls given contexts, whose
    sequence cannot be read back."""

    def __init__(self, model, role: str, log: list):
        self.model, self.role, self.log = model, role, log
        self.vocab_size = model.vocab_size
        self.order = getattr(model, "order", None)

    def __call__(self, *args, **kwargs):
        out = self.model(*args, **kwargs)
        # a call in the HF convention gives only the new ids; its output knows the whole sequence (cache + new)
        tokens = getattr(out, "_ids", None)
        if tokens is None:
            tokens = args[0] if args else kwargs.get("input_ids", kwargs.get("tokens"))
        self.log.append((self.role, _real(tokens)))
        return out

    def __getattr__(self, name):
        attribute = getattr(self.model, name)
        if name not in _ENTRY_POINTS or not callable(attribute):
            return attribute

        def recorded(*args, **kwargs):
            if name == "last_probs":
                sequence = _real(args[0] if args else kwargs.get("tokens"))
            elif name == "start_probs":
                sequence = ()
            else:
                sequence = None
            self.log.append((self.role, sequence))
            return attribute(*args, **kwargs)

        return recorded


def _recording(generate, log: list):
    """``generate`` with its target and draft wrapped in :class:`_Recorder` s writing to ``log``."""

    def recorded(**kwargs):
        kwargs["target"] = _Recorder(kwargs["target"], "target", log)
        kwargs["draft"] = _Recorder(kwargs["draft"], "draft", log)
        return generate(**kwargs)

    recorded.__name__ = getattr(generate, "__name__", "generate")
    return recorded


def _agreement(sequence: tuple, start: int, output: np.ndarray) -> int:
    """Length of the common prefix of ``sequence[start:]`` and ``output``."""
    tail = np.asarray(sequence[start:], dtype=np.int64)
    n = min(tail.size, output.size)
    differ = np.flatnonzero(tail[:n] != output[:n])
    return int(differ[0]) if differ.size else n


def judge_steps(log: list, prompt, output, target, draft, *, scale_cap: float):
    """Per-step terms of one single-row run: ``(terms, summary)`` or ``(None, reason)``.

    Each target call after an optional prefill is one verification step. The committed prefix
    ``m`` before a call is inferred from the output ``O``: a call conditioning on ``P + O[:m]
    + d_1..d_k`` verifies the ``k`` drafts ``d`` and commits ``e = min(a + 1, T - m)`` tokens, where
    ``m + a`` is the length of its agreement with ``O`` (a recovered token differs from the
    rejected draft with probability 1, so ``a`` is the accepted count). Given the drafts, speculative
    sampling commits ``N = min(1 + A, R)`` with ``P(A >= i) = prod_{l<=i} min(1, p_l(d_l) / q_l(d_l))``
    (Leviathan et al. 2023, Algorithm 1; exact for any drafting rule, adaptive ``k`` included), so
    ``X = E[N] - e`` is a martingale difference with exact conditional variance ``Var N``.
    Inefficiency adds a positive drift: a call that does not extend the committed prefix (``X = 1``:
    a call must commit a token), or a step carrying no draft while more than one token remains
    (``X = beta(c) = sum_x min(p, q)``: one draft would have added that much in expectation). The
    first target call, made before any draft call with no draft in it, is a prefill: not a step.

    ``terms`` is ``[(X * s, Var N * s^2)]`` with ``s = min(1, scale_cap / (E[N] - 1))`` (a predictable
    scale that bounds every increment by ``scale_cap``).
    """
    P = tuple(int(t) for t in prompt if t >= 0)
    p, O, T = len(P), np.asarray(output, dtype=np.int64), int(np.asarray(output).size)
    if any(seq is None for role, seq in log if role == "target"):
        return None, "a target call was made with contexts, not tokens (its sequence cannot be read back)"
    terms, m, drafted_yet, first_target, prefill_fallback = [], 0, False, True, False
    count = dict.fromkeys(("prefill_calls", "steps", "wasted_calls", "draftless_steps", "drafts", "tokens"), 0)
    for role, seq in log:
        if role == "draft":
            drafted_yet = True
            continue
        if first_target:
            first_target = False
            if not drafted_yet and len(seq) == p and seq == P:
                count["prefill_calls"] = 1
                m, prefill_fallback = min(T, 1), True  # a prefill that commits O[0] (gpt-fast); else see below
                continue
        consistent = len(seq) >= p + m and seq[:p] == P and np.array_equal(np.asarray(seq[p:p + m]), O[:m])
        if not consistent and prefill_fallback and m == 1:  # the prefill committed nothing
            m = 0
            consistent = len(seq) >= p and seq[:p] == P
        prefill_fallback = False
        remaining, k = T - m, len(seq) - p - m
        context = np.array([list(P) + [int(t) for t in O[:m]]], dtype=np.int64)
        if k == 0 and remaining > 0 and consistent:
            e, term = 1, _draftless_term(context, remaining, target, draft)
            count["draftless_steps"] += remaining > 1
        elif remaining > 0 and consistent:
            e = min(_agreement(seq, p, O) + 1, T) - m
            term = _drafted_term(np.asarray(seq[p + m:], dtype=np.int64), context, remaining, e, target, draft,
                                 scale_cap)
        else:
            term = None
        if term is None:  # no step: an inconsistent call, or one whose commit is no speculative step's
            count["wasted_calls"] += 1
            terms.append((1.0, 0.0))
            continue
        terms.append(term)
        m += e
        for key, added in (("steps", 1), ("drafts", k), ("tokens", e)):
            count[key] += added
    return terms, count


def _draftless_term(context, remaining: int, target, draft) -> tuple:
    """A step with no draft while more than one token remains: the drift ``beta(c) = sum_x min(p, q)`` (one
    draft would have added that much in expectation; Leviathan et al. 2023, Eq. 1), never noise."""
    if remaining <= 1:
        return 0.0, 0.0
    beta = float(np.minimum(last_token_probs(target, context), last_token_probs(draft, context)).sum())
    return min(1.0, beta), 0.0


def _drafted_term(drafts, context, remaining: int, e: int, target, draft, scale_cap: float):
    """``(X * s, Var N * s^2)`` of a step that verified ``drafts`` after ``context`` and committed ``e``
    tokens, or None where ``e`` is not a possible commit (see :func:`judge_steps`)."""
    k = drafts.size
    prefixes = np.full((k, context.shape[1] + k - 1), -1, dtype=np.int64)
    for i in range(k):
        prefixes[i, :context.shape[1] + i] = list(context[0]) + [int(t) for t in drafts[:i]]
    p_at = last_token_probs(target, prefixes)[np.arange(k), drafts]
    q_at = last_token_probs(draft, prefixes)[np.arange(k), drafts]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q_at > 0, np.minimum(1.0, p_at / np.where(q_at > 0, q_at, 1.0)),
                         (p_at > 0).astype(float))
    tail = np.concatenate([[1.0], np.cumprod(ratio)])[:min(k, remaining - 1) + 1]  # P(N > i), i < min(k+1, R)
    if not 1 <= e <= tail.size:
        return None
    mean = float(tail.sum())
    second = float(((2 * np.arange(tail.size) + 1) * tail).sum())
    scale = min(1.0, scale_cap / (mean - 1.0)) if mean > 1.0 else 1.0
    return (mean - e) * scale, max(second - mean * mean, 0.0) * scale * scale


def freedman_threshold(variation: float, bound: float, alpha: float) -> float:
    """The shortfall a sum of martingale differences ``<= bound`` exceeds with probability ``<= alpha``,
    whatever its predictable variation ``variation``.

    Freedman (1975), Theorem 1.6: ``P(S_n >= t and W_n <= v) <= exp(-t^2 / (2 (v + b t / 3)))``; stitched
    over the grid ``v_j = 2^j`` (``j <`` :data:`VARIANCE_GRID`, alpha split evenly) and read at the
    smallest ``v_j >= W``: ``t = b L / 3 + sqrt((b L / 3)^2 + 2 v_j L)`` with ``L = log(grid / alpha)``.
    """
    level = math.log(VARIANCE_GRID / alpha)
    v = 2.0 ** max(0, math.ceil(math.log2(max(variation, 1.0))))
    a = bound * level / 3.0
    return a + math.sqrt(a * a + 2.0 * v * level)


class TargetCalls(Check):
    """Single-row runs: the target calls a loop makes, judged per verification step.

    Each step's commit is compared with its exact expectation given the drafts it verified
    (:func:`judge_steps`), so an adaptive number of drafts (HF's schedule, its confidence stop)
    and a prefill call are not inefficiency; a call that commits nothing, or a step that carries no
    draft while tokens remain (a loop that verifies one token per target call), is. The summed
    shortfall is tested by a stitched Freedman bound (:func:`freedman_threshold`). A loop whose
    target calls cannot be read back (laws asked for by contexts) falls back to the whole-run test:
    calls to emit ``max_new_tokens`` against :func:`exact.expected_target_calls` for a fixed gamma
    (Bernstein). Chained speculative steps are exact (Leviathan et al. 2023), so a failing loop may
    be exact but pointless: an inefficiency, not a failure.
    """

    power = "stitched Freedman bound on the per-step shortfall over 50 to 400 single-row runs"

    @classmethod
    def plan(cls, scenario, options) -> list:
        selection = options.checks
        return [PlannedTest("target_calls", "target_calls")] if "target_calls" in selection else []

    def finish(self) -> None:
        ctx, s = self.ctx, self.ctx.scenario
        if "target_calls" not in ctx.planned or ctx.stopped:
            return
        alpha = ctx.spend("target_calls")
        target, draft = ctx.backend.law_model(s.target), ctx.backend.law_model(s.draft)
        runs = max(MIN_RUNS, min(MAX_RUNS, ctx.mode.max_calls))
        log: list = []
        recorder = type(self.caller)(ctx, _recording(self.caller.generate, log))
        cap = float(max(1, s.gamma))
        terms, totals, counts, which, fallback = [], {}, [], [], None
        for _ in range(runs):
            i = int(ctx.rng.integers(0, s.prompts.shape[0]))
            log.clear()
            out, _ = recorder.call(np.array([i]), ctx.next_seed(), "target_calls")
            if out is None:
                return
            counts.append(recorder.last_target.calls)
            which.append(i)
            if fallback is None:
                run_terms, summary = judge_steps(log, s.prompts[i], out[0], target, draft, scale_cap=cap)
                if run_terms is None:
                    fallback = summary
                    continue
                terms += run_terms
                for key, value in summary.items():
                    totals[key] = totals.get(key, 0) + value
        counts = np.array(counts, dtype=float)
        self.counts.calls_per_token = float(counts.mean() / s.max_new_tokens)
        if fallback is not None:
            self._whole_run(alpha, counts, np.array(which), target, draft, fallback)
            return
        shortfall = float(sum(x for x, _ in terms))
        variation = float(sum(v for _, v in terms))
        threshold = freedman_threshold(variation, cap, alpha)
        passed = shortfall < threshold
        steps = max(totals.get("steps", 0), 1)
        details = {"method": "per-step", "shortfall": shortfall, "threshold": threshold, "variation": variation,
                   "bound": cap, "runs": runs, "tokens_per_run": s.max_new_tokens,
                   "calls_per_token": self.counts.calls_per_token, "mean_drafts_per_step": totals.get("drafts", 0) / steps,
                   **totals}
        ctx.recorder.record(TestRecord(s.name, "target_calls", "stitched Freedman bound on the per-step shortfall of "
                                       "committed tokens (exact expectation given each step's drafts)", bool(passed),
                                       alpha, runs, statistic=shortfall, details=details))
        if not passed:
            why = []
            if totals.get("wasted_calls"):
                why.append(f"{totals['wasted_calls']} target call(s) committed nothing")
            if totals.get("draftless_steps"):
                why.append(f"{totals['draftless_steps']} step(s) verified no draft while tokens remained")
            ctx.recorder.inefficiency("target_calls", f"commits {shortfall:.1f} tokens fewer over {runs} runs than "
                                      f"speculative decoding would with the drafts it proposed (bound {threshold:.1f}"
                                      + (f"; {', '.join(why)}" if why else "") + "): the output may be exact, but the "
                                      "loop gives up part of the speedup",
                                      {"shortfall": shortfall, "threshold": threshold, **totals})

    def _whole_run(self, alpha, counts, which, target, draft, why) -> None:
        """The fixed-gamma whole-run test (Bernstein on calls per run, exact mean and variance)."""
        ctx, s = self.ctx, self.ctx.scenario
        moments = {i: expected_target_calls(target, draft, s.gamma, s.max_new_tokens, s.prompts[i][s.prompts[i] >= 0],
                                            with_variance=True) for i in set(which.tolist())}
        means = np.array([moments[i][0] for i in which])
        variances = np.array([moments[i][1] for i in which])
        m = counts.size
        mean, exact_mean, sigma2 = counts.mean(), means.mean(), variances.mean()
        log_term = np.log(1.0 / alpha)
        span = float(s.max_new_tokens)
        # Bernstein: P(mean - E >= t) <= exp(-m t^2 / (2 sigma^2 + 2 T t / 3)); solve for t.
        a, b = m, -2.0 * span * log_term / 3.0
        margin = (-b + np.sqrt(b * b + 4 * a * 2 * sigma2 * log_term)) / (2 * a)
        passed = mean <= exact_mean + margin
        ctx.recorder.record(TestRecord(
            s.name, "target_calls", "Bernstein bound on target calls per run (exact mean and variance, fixed gamma)",
            bool(passed), alpha, m, statistic=float(mean),
            details={"method": "whole-run", "why": why, "expected_calls": float(exact_mean), "variance": float(sigma2),
                     "margin": float(margin), "tokens_per_run": s.max_new_tokens,
                     "calls_per_token": float(mean / s.max_new_tokens),
                     "expected_calls_per_token": float(exact_mean / s.max_new_tokens)},
        ))
        if not passed:
            ctx.recorder.inefficiency("target_calls", f"calls the target {mean:.2f} times per {s.max_new_tokens} tokens "
                                      f"where speculative decoding needs {exact_mean:.2f} in expectation (bound "
                                      f"{exact_mean + margin:.2f}): the output may be exact, but the loop gives up "
                                      "part of the speedup", {"calls_per_run": float(mean), "expected": float(exact_mean)})
