"""The token-sampler kind: a sampling kernel (temperature, top-k, top-p, min-p) against its exact processed law.

``sample(*, logits | probs, <the steps it applies>, [indices,] generator) -> int [B]``, one value of each
parameter per output (temperature 0 = greedy, top_k 0 = off, top_p 1.0 = off, min_p 0 = off). What it takes
and how it processes a row is declared by a :class:`~specdec_check.exact.TokenProcessing` (or read from the
sampler's ``processing`` attribute). Each scenario's outputs are tested against their rows' exact laws
(:mod:`specdec_check.exact._token_law`), with ties and boundaries as first-class rows; the determinism and the
independence of the outputs are tested as for every kind.
"""

from __future__ import annotations

import dataclasses

from ..._settings import DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_SEED, MODES, TOKEN_MODES, mode_for_tv
from ...exact._token_law import TokenProcessing
from ...scenarios._token import TokenScenario, default_token_battery
from ..checks.randomness import Determinism
from ..core.api import run_check
from ..core.kind import Kind
from ..core.report import CheckReport, ScenarioSummary
from .caller import TokenCaller
from .laws import TokenLawCheck, TokenStep
from .randomness import TokenIndependence

__all__ = ["TOKEN_CHECKS", "TOKEN_SAMPLER", "TokenKind", "check_token_sampler", "token_kind", "token_mode"]

TOKEN_CHECKS = ("contract", "impossible", "token_law", "determinism", "independence")
#: The checks of a token scenario, in the order they start and finish (the law loop's draws come first, so a
#: seed replays a run).
SCENARIO_CHECKS = (TokenLawCheck, Determinism, TokenIndependence)


def token_mode(mode):
    """The token-sampler mode of a named mode (:data:`~specdec_check._settings.TOKEN_MODES`), or of a ``--tv``
    target (:func:`~specdec_check._settings.mode_for_tv` over the token mode of the same name); a token mode, or a
    mode built by hand, as it is."""
    named = MODES.get(mode.name)
    if named is not None and mode == named:
        return TOKEN_MODES[mode.name]
    if named is not None and mode == mode_for_tv(mode.design_tv, named):
        return mode_for_tv(mode.design_tv, TOKEN_MODES[mode.name])
    return mode


class TokenCounts:
    """What a token run counts beside its records: rows whose law the declared rules leave undetermined, and the
    outputs whose support was checked (added over a split scenario's shards)."""

    ambiguous_rows = 0
    outputs = 0

    def merge(self, later: "TokenCounts") -> "TokenCounts":
        self.outputs += later.outputs
        return self


class TokenKind(Kind):
    """The token-sampler kind for a declared :class:`~specdec_check.exact.TokenProcessing`."""

    name = "token_sampler"
    role = "token sampler"
    scenario_type = TokenScenario
    checks = TOKEN_CHECKS
    no_screen = "not a token-sampler check"
    splittable = True

    def __init__(self, processing: TokenProcessing = TokenProcessing()):
        self.processing = processing
        self.keywords = processing.keywords()

    def arguments(self) -> tuple:
        return (self.processing,)

    def scaled_mode(self, mode):
        return token_mode(mode)

    def default_battery(self) -> list:
        return default_token_battery(self.processing)

    def check_classes(self, ctx) -> tuple:
        return SCENARIO_CHECKS

    def check_classes_for(self, scenario, options) -> tuple:
        return SCENARIO_CHECKS

    def skip_reason(self, scenario):
        if scenario.processing != self.processing:
            return (f"the scenario was built for {scenario.processing.describe()}, not the sampler's "
                    f"{self.processing.describe()}")
        return None

    def caller(self, ctx, sampler) -> TokenCaller:
        return TokenCaller(ctx, sampler)

    def counts(self, ctx) -> TokenCounts:
        return TokenCounts()

    def law_budget(self, ctx, checks) -> tuple:
        return checks[0].calls_planned(), 1

    def law_plan(self, ctx) -> tuple:
        """``(law outputs, shards)`` the scenario plans (from its plan alone): a long law loop runs as block ranges
        of the mode's ``shard_rows`` outputs, side by side on an executor."""
        from ..core.parts import shard_calls

        law = TokenLawCheck(ctx, None, TokenCounts())
        law.start(spend=False)
        calls = law.calls_planned()  # shards count calls as the loop splits them (core.loop._split: rows_per_call)
        return calls * ctx.scenario.outputs_per_call(), -(-calls // shard_calls(ctx.scenario.rows_per_call, 1,
                                                                                 ctx.mode.shard_rows))

    def feed(self, ctx, caller, calls: int, reuse: int):
        for _ in range(calls):
            if ctx.stopped:
                return
            draw = caller.draw()
            yield draw, [draw]

    def step(self, ctx, caller, counts, block, outputs):
        return TokenStep(block.rows, outputs[0][1])

    def summary(self, ctx, counts, elapsed: float):
        s = ctx.scenario
        return ScenarioSummary(name=s.name, description=s.description, vocab_size=s.vocab_size, gamma=0,
                               rows_per_call=s.outputs_per_call(), calls=ctx.calls, samples=ctx.samples,
                               elapsed_s=elapsed, stopped_early=ctx.stopped)


#: The token-sampler kind for :class:`~specdec_check.exact.TokenProcessing`'s defaults.
TOKEN_SAMPLER = TokenKind()


def token_kind(processing: TokenProcessing | None = None) -> TokenKind:
    """:data:`TOKEN_SAMPLER`, or the kind for another declared processing."""
    return TOKEN_SAMPLER if processing in (None, TOKEN_SAMPLER.processing) else TokenKind(processing)


def _processing(processing, sample, scenarios):
    """The declared processing: given, else the sampler's ``processing`` attribute, else the scenarios', else the
    default; ``TypeError`` / ``ValueError`` saying how to fix a bad or conflicting one."""
    if processing is not None and not isinstance(processing, TokenProcessing):
        raise TypeError(f"processing must be a TokenProcessing (e.g. TokenProcessing(inputs='logits', "
                        f"order=('temperature', 'top_k'))); got {type(processing).__name__}.")
    declared = processing or getattr(sample, "processing", None)
    if declared is not None and not isinstance(declared, TokenProcessing):
        declared = None  # an attribute of another meaning: not a declaration
    if scenarios is not None and not isinstance(scenarios, str):
        found = {s.processing for s in scenarios if isinstance(s, TokenScenario)}
        if declared is None and len(found) == 1:
            declared = found.pop()
        elif declared is not None and found - {declared}:
            raise ValueError(f"the scenarios were built for {', '.join(sorted(p.describe() for p in found))}, not "
                             f"{declared.describe()}; build them with the sampler's processing.")
    return declared or TokenProcessing()


def check_token_sampler(sample, *, scenarios=None, mode=DEFAULT_MODE, backend=DEFAULT_BACKEND, seed=DEFAULT_SEED,
                        alpha=DEFAULT_ALPHA, progress=None, checks=None, device=None, dtype=None, processing=None,
                        strict=False, name=None, monitor=None, executor=None) -> CheckReport:
    """Check that a token sampler draws exactly from its processed law.

    ``sample(*, logits | probs, temperature, top_k, top_p, min_p, [indices,] generator) -> int [B]`` takes the
    steps its ``processing`` declares (a :class:`~specdec_check.exact.TokenProcessing`: inputs, order, tie rules,
    ``indices``; default: the sampler's ``processing`` attribute, else logits -> temperature -> top-k -> top-p
    with ties kept), one value per output (temperature 0 = greedy, top_k 0 = off, top_p 1.0 = off, min_p 0 =
    off). Each scenario (default :func:`~specdec_check.scenarios.default_token_battery`: heterogeneous rows,
    ties at the top-k and top-p boundaries, mass exactly at top_p, min-p exactly at a token, one-hot, flat and
    very negative rows, V from 2 to 152,064, bf16 logits) is tested for impossible outputs, the exact law of
    its outputs (an identity test over (row, token) cells, or the randomized PIT), determinism and
    independence. The modes are sized for a cheap kernel: design TV 1e-2 (quick), 1e-3 (default), 3e-4
    (thorough); ``alpha`` is the false-alarm budget of the whole call.
    """
    keywords = locals()
    kind = token_kind(_processing(processing, sample, scenarios))
    return run_check(kind, sample, keywords)
