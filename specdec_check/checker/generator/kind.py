"""The decode-loop kind: a whole draft-then-verify generation loop on the checker's models.

``generate(*, target, draft, prompts, max_new_tokens, gamma, generator) -> int [B, max_new_tokens]`` runs on
calls of ``rows_per_call`` rows, each from a prompt chosen at random; the generated sequences are tested
against the target's exact laws, and the target calls per token against speculative decoding's.
"""

from __future__ import annotations

from ..._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_SEED
from ...scenarios import GeneratorScenario, default_generator_battery
from ..core.api import run_check
from ..core.kind import Kind
from ..core.report import CheckReport, ScenarioSummary
from .caller import GENERATOR_KEYWORDS, GeneratorCaller
from .laws import GeneratorLaws
from .target_calls import TargetCalls

__all__ = ["GENERATOR", "GENERATOR_CHECKS", "GENERATOR_KEYWORDS", "GeneratorKind", "check_generator"]

GENERATOR_CHECKS = ("contract", "joint", "marginals", "pairs", "target_calls")
#: The checks of a decode-loop scenario, in the order they start and finish (each judges its own records).
SCENARIO_CHECKS = (GeneratorLaws, TargetCalls)


class GeneratorCounts:
    """What a decode-loop run counts beside its records: the target calls per token the loop made."""

    calls_per_token = None


class GeneratorStep:
    """One call's generated tokens ``out`` and the prompt indices they were generated from (``block``)."""

    def __init__(self, block, out):
        self.block, self.out = block, out


class GeneratorKind(Kind):
    """The decode-loop kind (see the module docstring)."""

    name = "generator"
    role = "decode loop"
    keywords = GENERATOR_KEYWORDS
    scenario_type = GeneratorScenario
    checks = GENERATOR_CHECKS

    def default_battery(self) -> list:
        return default_generator_battery()

    def check_classes(self, ctx) -> tuple:
        return SCENARIO_CHECKS

    def check_classes_for(self, scenario, options) -> tuple:
        return SCENARIO_CHECKS

    def degenerate(self, scenario):
        if scenario.gamma == 0 or scenario.vocab_size == 1:
            return f"gamma = {scenario.gamma}, V = {scenario.vocab_size}"
        return None

    def caller(self, ctx, sampler) -> GeneratorCaller:
        return GeneratorCaller(ctx, sampler, degenerate=self.degenerate(ctx.scenario))

    def counts(self, ctx) -> GeneratorCounts:
        return GeneratorCounts()

    def law_budget(self, ctx, checks) -> tuple:
        return checks[0].calls_planned(), 1

    def feed(self, ctx, caller, calls: int, reuse: int):
        """Calls of ``rows_per_call`` rows, each from a prompt chosen at random."""
        s = ctx.scenario
        for _ in range(calls):
            index = ctx.rng.integers(0, s.prompts.shape[0], size=s.rows_per_call)
            yield index, [index]

    def step(self, ctx, caller, counts, block, outputs):
        return GeneratorStep(block, outputs[0][0])

    def summary(self, ctx, counts, elapsed: float):
        s = ctx.scenario
        return ScenarioSummary(
            name=s.name, description=s.description, vocab_size=s.vocab_size, gamma=s.gamma,
            rows_per_call=s.rows_per_call, calls=ctx.calls, samples=ctx.samples,
            target_calls_per_token=counts.calls_per_token, elapsed_s=elapsed, stopped_early=ctx.stopped,
        )


#: The decode-loop kind.
GENERATOR = GeneratorKind()


def check_generator(generate, *, scenarios=None, target=None, draft=None, oracle=None, prompts=None, max_new_tokens=8,
                    gamma=3, rows_per_call=1, eos_token_id=None, mode=DEFAULT_MODE, backend=DEFAULT_BACKEND,
                    seed=DEFAULT_SEED, alpha=DEFAULT_ALPHA, progress=None, checks=None, device=None, dtype=None,
                    strict=False, name=None, monitor=None, executor=None) -> CheckReport:
    """Check that the decode loop ``generate`` produces exactly the target's law, at a speedup.

    ``generate(*, target, draft, prompts, max_new_tokens, gamma, generator)`` runs on each
    scenario (default :func:`~specdec_check.scenarios.default_generator_battery`) from
    prompts of different lengths (prompt chosen at random per row). Tested: the exact joint
    law of the generated tokens where enumerable (:func:`exact.joint`), otherwise every
    per-position and adjacent-pair law (:func:`exact.marginals`, :func:`exact.pair_marginals`);
    and the target calls per step against the exact expectation
    (:func:`exact.expected_target_calls`): chained speculative steps are exact (Leviathan
    et al. 2023), so a loop that calls the target once per token is exact but pointless.
    ``executor``: where the scenarios run, as for :func:`~specdec_check.checker.check_verifier`.

    **On your own model pair** (``target=``, ``draft=``): the loop is handed your models (a transformers causal LM,
    or any ``tokens -> logits`` callable) and its output is tested against the target's own uncached forward pass
    in float64 (``oracle=``: :func:`~specdec_check.models.from_hf_model` with the processing the loop samples,
    e.g. ``top_k``; default: the processing the target's ``generation_config`` declares, as
    ``generate(do_sample=True)`` applies it), at any vocabulary: the sequential Rosenblatt transform of every
    emitted token given its prefix (per position, pooled, adjacent pairs), the first token's counts per prompt,
    impossible tokens, determinism; the target's forward passes per token are reported. ``prompts`` (token
    strings; default 8 random ones), ``max_new_tokens``, ``gamma``, ``rows_per_call`` (1 for a loop of batch size
    1) and ``eos_token_id`` (a stop token, or several; -1 after it; default: a transformers target's
    ``generation_config.eos_token_id``) shape the scenario.
    """
    if target is not None:
        from ..model_loop.kind import model_loop_kind

        kind = model_loop_kind(target, draft, oracle, prompts=prompts, max_new_tokens=max_new_tokens, gamma=gamma,
                               rows_per_call=rows_per_call, eos_token_id=eos_token_id)
        keywords = {k: v for k, v in locals().items() if k not in ("target", "draft", "oracle", "prompts",
                                                                   "max_new_tokens", "gamma", "rows_per_call",
                                                                   "eos_token_id", "kind")}
        return run_check(kind, generate, keywords)
    if draft is not None or oracle is not None or prompts is not None:
        raise ValueError("draft=, oracle= and prompts= describe a decode loop on your own models: give target= too.")
    return run_check(GENERATOR, generate, locals())
