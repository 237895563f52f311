"""A decode loop on the user's own model pair, the target model itself the oracle (issue 26).

``check_generator(generate, target=model, draft=model, prompts=...)``: the loop is called as always
(``generate(*, target, draft, prompts, max_new_tokens, gamma, generator) -> int [B, max_new_tokens]``) but is
handed the user's models, and what it emits is tested against the target's own uncached forward pass
(:class:`~specdec_check.models.ModelLaw`): at any vocabulary, by the sequential Rosenblatt transform.
"""

from __future__ import annotations

from ...scenarios._model_loop import ModelLoopScenario, default_model_loop_battery
from ..checks.base import Check
from ..checks.randomness import Determinism
from ..core.kind import Kind
from ..core.report import ScenarioSummary
from ..generator.caller import GENERATOR_KEYWORDS
from .caller import ModelLoopCaller
from .laws import LoopLaws

__all__ = ["MODEL_LOOP_CHECKS", "ModelLoopKind", "model_loop_kind"]

MODEL_LOOP_CHECKS = ("contract", "impossible", "positions", "pairs", "first_token", "determinism")


class ReleaseCounter(Check):
    """Last of a scenario's checks: the forward hook that counted the target's passes is removed."""

    def finish(self) -> None:
        self.caller.counter.close()


class LoopCounts:
    """The target's forward passes per emitted token, over the run."""

    forward_passes = 0
    tokens = 0

    @property
    def calls_per_token(self):
        return self.forward_passes / self.tokens if self.tokens else None


class ModelLoopKind(Kind):
    """See the module docstring. Not picklable into worker processes (the models stay in this process)."""

    name = "generator"
    role = "decode loop"
    keywords = GENERATOR_KEYWORDS
    scenario_type = ModelLoopScenario
    checks = MODEL_LOOP_CHECKS
    has_command = False
    api_function = "check_generator"

    def __init__(self, target, draft, oracle, *, prompts=None, max_new_tokens=8, gamma=3, rows_per_call=1,
                 eos_token_id=None):
        self.target, self.draft, self.oracle = target, draft, oracle
        self.battery = default_model_loop_battery(oracle.vocab_size, prompts=prompts, max_new_tokens=max_new_tokens,
                                                  gamma=gamma, rows_per_call=rows_per_call, eos_token_id=eos_token_id)

    def arguments(self) -> tuple:
        return (id(self),)

    def repro_keywords(self) -> tuple:
        return ("target=<your target model>", "draft=<your draft model>", f"oracle=<{self.oracle.describe()}>")

    def validate(self, options) -> None:
        if options.executor is not None:
            raise ValueError("a decode loop on your own models runs in this process (executor=None): the models are "
                             "not sent to workers.")
        if options.backend.name != "numpy":
            raise ValueError("a decode loop on your own models takes prompts as numpy arrays (backend='numpy'); the "
                             "models run where they are.")

    def default_battery(self) -> list:
        return self.battery

    def check_classes(self, ctx) -> tuple:
        return (LoopLaws, Determinism, ReleaseCounter)

    def check_classes_for(self, scenario, options) -> tuple:
        return (LoopLaws, Determinism, ReleaseCounter)

    def caller(self, ctx, sampler) -> ModelLoopCaller:
        return ModelLoopCaller(ctx, sampler, self)

    def counts(self, ctx) -> LoopCounts:
        return LoopCounts()

    def law_budget(self, ctx, checks) -> tuple:
        return checks[0].calls_planned(), 1

    def feed(self, ctx, caller, calls: int, reuse: int):
        for _ in range(calls):
            if ctx.stopped:
                return
            index = caller.draw()
            caller.counter.calls = 0
            yield index, [index]

    def step(self, ctx, caller, counts, block, outputs):
        out = outputs[0][1]
        counts.forward_passes += caller.counter.calls
        counts.tokens += int((out >= 0).sum())
        return block, out

    def summary(self, ctx, counts, elapsed: float):
        s = ctx.scenario
        return ScenarioSummary(name=s.name, description=s.description, vocab_size=self.oracle.vocab_size,
                               gamma=s.gamma, rows_per_call=s.rows_per_call, calls=ctx.calls, samples=ctx.samples,
                               target_calls_per_token=counts.calls_per_token, elapsed_s=elapsed,
                               stopped_early=ctx.stopped)


def model_loop_kind(target, draft, oracle=None, **scenario) -> ModelLoopKind:
    """The kind for ``target`` and ``draft`` (the loop is handed them); ``oracle`` the target's laws as the loop
    samples them (a :class:`~specdec_check.models.ModelLaw`; default: :func:`~specdec_check.models.from_hf_model`
    of a transformers model, :func:`~specdec_check.models.from_torch_module` of a callable or of gpt-fast's
    ``Transformer``, raw softmax). Without
    ``eos_token_id``, a transformers target's ``generation_config.eos_token_id`` is the stop token."""
    from ...models._oracle import ModelLaw, from_hf_model, from_mlx_model, from_torch_module

    if oracle is None:
        if type(target).__module__.startswith("mlx_lm.") and hasattr(getattr(target, "args", None), "vocab_size"):
            oracle = from_mlx_model(target)
        elif hasattr(target, "config") and hasattr(target, "generate"):
            oracle = from_hf_model(target)
        elif callable(target) and (hasattr(target, "vocab_size") or hasattr(getattr(target, "config", None),
                                                                             "vocab_size")):
            oracle = from_torch_module(target)  # gpt-fast's Transformer too (its config has the vocabulary)
        else:
            raise TypeError("target must be a transformers causal LM, or give oracle=from_torch_module(fn, vocab_size) "
                            f"for a {type(target).__name__}.")
    if not isinstance(oracle, ModelLaw):
        raise TypeError(f"oracle must be a ModelLaw (from_hf_model / from_torch_module); got {type(oracle).__name__}.")
    if scenario.get("eos_token_id") is None:
        # A transformers model stops at its generation_config's stop token(s), as its generate does (and as the
        # processing is read from it): set generation_config.eos_token_id = None to check without a stop token.
        scenario["eos_token_id"] = getattr(getattr(target, "generation_config", None), "eos_token_id", None)
    return ModelLoopKind(target, draft, oracle, **scenario)
