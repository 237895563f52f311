"""check_generator: run a decode loop and test the law of what it generates."""

from __future__ import annotations

import time
import traceback

import numpy as np

from ..exact import expected_target_calls, joint, marginals, pair_marginals
from ..scenarios import GeneratorScenario, default_generator_battery
from ._callables import GENERATOR_KEYWORDS
from ._report import CheckReport, ScenarioSummary, TestRecord
from ._run import ScenarioRunBase, planned_samples, run_battery
from ._tally import CountTally

__all__ = ["GENERATOR_CHECKS", "check_generator"]

GENERATOR_CHECKS = ("contract", "joint", "marginals", "pairs", "target_calls")


class _CountingModel:
    """Wraps a causal model and counts its calls (forward passes)."""

    def __init__(self, model):
        self.model = model
        self.calls = 0
        self.vocab_size = model.vocab_size
        self.order = getattr(model, "order", None)

    def __call__(self, tokens):
        self.calls += 1
        return self.model(tokens)

    def __getattr__(self, name):  # last_probs, probs_at, ... pass through uncounted
        return getattr(self.model, name)


def _planned(scenario: GeneratorScenario, checks) -> list:
    tests = []
    if scenario.enumerable:
        if "joint" in checks:
            tests.append("joint")
    else:
        if "marginals" in checks:
            tests += [f"marginals[{t}]" for t in range(scenario.max_new_tokens)]
        if "pairs" in checks:
            tests += [f"pairs[{t}]" for t in range(scenario.max_new_tokens - 1)]
    if "target_calls" in checks:
        tests.append("target_calls")
    return tests


def check_generator(generate, *, scenarios=None, mode="default", backend="numpy", seed=0, alpha=1e-6, progress=None,
                    checks=None, device=None, dtype=None, monitor=None) -> CheckReport:
    """Check that the decode loop ``generate`` produces exactly the target's law, at a speedup.

    ``generate(*, target, draft, prompts, max_new_tokens, gamma, generator)`` runs on each
    scenario (default :func:`~specdec_check.scenarios.default_generator_battery`) from
    prompts of different lengths (prompt chosen at random per row). Tested: the exact joint
    law of the generated tokens where enumerable (:func:`exact.joint`), otherwise every
    per-position and adjacent-pair law (:func:`exact.marginals`, :func:`exact.pair_marginals`);
    and the target calls per step against the exact expectation
    (:func:`exact.expected_target_calls`): chained speculative steps are exact (Leviathan
    et al. 2023), so a loop that calls the target once per token is exact but pointless.
    ``monitor`` is as in :func:`~specdec_check.checker.check_verifier`.
    """
    return run_battery(kind="generator", command="generate", sampler=generate, keywords=GENERATOR_KEYWORDS,
                       scenario_type=GeneratorScenario, default_battery=default_generator_battery, plan=_planned,
                       run_class=_GeneratorRun, known_checks=GENERATOR_CHECKS, scenarios=scenarios, mode=mode,
                       backend=backend, seed=seed, alpha=alpha, progress=progress, checks=checks, device=device,
                       dtype=dtype, monitor=monitor)


class _GeneratorRun(ScenarioRunBase):
    """Everything the checker does for one decode-loop scenario."""

    def __init__(self, *args):
        super().__init__(*args)
        self.generate = self.sampler
        self.calls_per_token = None

    def run_once(self, prompt_index, check="contract"):
        s = self.scenario
        prompts = s.prompts[prompt_index]
        target, draft = self.backend.models(s.target, s.draft)
        target, draft = _CountingModel(target), _CountingModel(draft)
        given = self.backend.prompts(prompts.copy())
        snapshot = given.clone() if hasattr(given, "clone") else np.array(given, copy=True)
        self.calls += 1
        try:
            out = self.sampler_call(self.generate, target=target, draft=draft, prompts=given,
                                    max_new_tokens=s.max_new_tokens, gamma=s.gamma,
                                    generator=self.backend.generator(int(self.rng.integers(2**63 - 1))))
            out = self.backend.to_host(out)
        except Exception as exc:
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
            self.fail(check, f"the decode loop raised {type(exc).__name__}: {exc}", {"traceback": "".join(tb[-6:])})
            self.stopped = True
            return None, target
        expected_shape = (prompts.shape[0], s.max_new_tokens)
        problem = None
        if not isinstance(out, np.ndarray) or out.shape != expected_shape:
            problem = f"output shape {getattr(out, 'shape', None)} != [B, max_new_tokens] = {expected_shape}"
        elif not np.issubdtype(out.dtype, np.integer):
            problem = f"output dtype {out.dtype} is not an integer type"
        elif ((out < 0) | (out >= s.vocab_size)).any():
            row, col = (int(i) for i in np.argwhere((out < 0) | (out >= s.vocab_size))[0])
            problem = f"token {int(out[row, col])} at row {row}, position {col} is not in [0, {s.vocab_size})"
        else:
            same = snapshot.equal(given) if hasattr(snapshot, "equal") else np.array_equal(snapshot, given)
            if not same:
                problem = "the decode loop modified its prompts in place"
        if problem:  # checked whatever the selection: the law tallies need well-formed output
            self.fail("contract", problem)
            self.stopped = True
            return None, target
        return out, target

    def execute(self):
        started = time.perf_counter()
        s, mode = self.scenario, self.mode
        n_prompts, vocab, length = s.prompts.shape[0], s.vocab_size, s.max_new_tokens
        clean = [p[p >= 0] for p in s.prompts]
        law_target = self.backend.law_model(s.target)  # the laws the sampler sees (low-precision casts)
        tallies = {}
        if "joint" in self.plan:
            law = np.concatenate([joint(law_target, length, p).reshape(-1) for p in clean]) / n_prompts
            tallies["joint"] = CountTally(s.name, "joint", law, alpha=self.ledger.spend(f"{s.name}/joint"))
        if any(p.startswith("marginals") for p in self.plan):
            margs = np.stack([marginals(law_target, length, p) for p in clean]) / n_prompts  # [P, T, V]
            for t in range(length):
                tallies[f"marginals[{t}]"] = CountTally(s.name, "marginals", margs[:, t].reshape(-1),
                                                        alpha=self.ledger.spend(f"{s.name}/marginals[{t}]"))
        if any(p.startswith("pairs") for p in self.plan):
            pairs = np.stack([pair_marginals(law_target, length, p) for p in clean]) / n_prompts  # [P, T-1, V, V]
            for t in range(length - 1):
                tallies[f"pairs[{t}]"] = CountTally(s.name, "pairs", pairs[:, t].reshape(-1),
                                                    alpha=self.ledger.spend(f"{s.name}/pairs[{t}]"))
        planned_n = planned_samples(mode.design_tv, min(64, max(2, vocab**min(length, 2))), self.ledger.per_check / 2)
        n_target = min(planned_n, mode.max_samples)
        calls = int(max(1, min(mode.max_calls, -(-n_target // s.rows_per_call))))
        for _ in range(calls):
            index = self.rng.integers(0, n_prompts, size=s.rows_per_call)
            out, _target = self.run_once(index)
            if out is None:
                break
            self.samples += out.shape[0]
            for name, tally in tallies.items():
                if name == "joint":
                    code = np.zeros(out.shape[0], dtype=np.int64)
                    for t in range(length):
                        code = code * vocab + out[:, t]
                    tally.add_codes(index * vocab**length + code)
                elif name.startswith("marginals"):
                    t = int(name[10:-1])
                    tally.add_codes(index * vocab + out[:, t])
                else:
                    t = int(name[6:-1])
                    tally.add_codes((index * vocab + out[:, t]) * vocab + out[:, t + 1])
            if any(t.rejected_early for t in tallies.values()):
                break
        for name, tally in tallies.items():
            rec = tally.record(extra_details={"position": name})
            self.records.append(rec)
            if not rec.passed:
                self.fail(rec.check, f"the generated {name} law differs from the target's exact law: p = {rec.pvalue:.3g}"
                          + (f", e-value {rec.evalue:.3g}" if rec.evalue is not None else "")
                          + f", plug-in TV {rec.tv_plugin:.3g} over {rec.n:,} sequences",
                          {"pvalue": rec.pvalue, "n": rec.n, "worst_cells": rec.details.get("worst_cells", [])})
        if "target_calls" in self.plan and not self.stopped:
            self.target_calls()
        self.summary = ScenarioSummary(
            name=s.name, description=s.description, vocab_size=vocab, gamma=s.gamma, rows_per_call=s.rows_per_call,
            calls=self.calls, samples=self.samples, target_calls_per_token=self.calls_per_token,
            elapsed_s=time.perf_counter() - started, stopped_early=self.stopped,
        )

    def target_calls(self):
        """Single-row runs: target calls to emit max_new_tokens, against the exact expectation.

        Each run needs between 1 and T = max_new_tokens calls, with exact mean and variance from
        :func:`exact.expected_target_calls`. Bernstein's inequality bounds the excess of the mean
        of m runs: P(mean - E >= t) <= exp(-m t^2 / (2 sigma^2 + 2 T t / 3)).
        """
        s = self.scenario
        alpha = self.ledger.spend(f"{s.name}/target_calls")
        target, draft = self.backend.law_model(s.target), self.backend.law_model(s.draft)
        moments = [expected_target_calls(target, draft, s.gamma, s.max_new_tokens, p[p >= 0], with_variance=True)
                   for p in s.prompts]
        runs = max(50, min(400, self.mode.max_calls))
        counts, which = [], []
        for _ in range(runs):
            i = int(self.rng.integers(0, s.prompts.shape[0]))
            out, target = self.run_once(np.array([i]), "target_calls")
            if out is None:
                return
            counts.append(target.calls)
            which.append(i)
        counts = np.array(counts, dtype=float)
        which = np.array(which)
        means = np.array([m for m, _ in moments])[which]
        variances = np.array([v for _, v in moments])[which]
        mean, exact_mean, sigma2 = counts.mean(), means.mean(), variances.mean()
        log_term = np.log(1.0 / alpha)
        span = float(s.max_new_tokens)
        # Solve m t^2 = log_term (2 sigma^2 + 2 span t / 3) for t.
        a, b = runs, -2.0 * span * log_term / 3.0
        margin = (-b + np.sqrt(b * b + 4 * a * 2 * sigma2 * log_term)) / (2 * a)
        passed = mean <= exact_mean + margin
        self.calls_per_token = float(mean / s.max_new_tokens)
        self.records.append(TestRecord(
            s.name, "target_calls", "Bernstein bound on target calls per run (exact mean and variance)", bool(passed),
            alpha, runs, statistic=float(mean),
            details={"expected_calls": float(exact_mean), "variance": float(sigma2), "margin": float(margin),
                     "tokens_per_run": s.max_new_tokens, "calls_per_token": float(mean / s.max_new_tokens),
                     "expected_calls_per_token": float(exact_mean / s.max_new_tokens)},
        ))
        if not passed:
            self.fail("target_calls", f"calls the target {mean:.2f} times per {s.max_new_tokens} tokens where speculative "
                      f"decoding needs {exact_mean:.2f} in expectation (bound {exact_mean + margin:.2f}): the output may "
                      "be exact, but the loop gives up part of the speedup",
                      {"calls_per_run": float(mean), "expected": float(exact_mean)}, kind="inefficiency")
