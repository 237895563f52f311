"""Token-sampler scenarios: tables of logit (or probability) rows with per-row sampling parameters, and the
default battery, in which boundaries and ties are first-class rows.

A :class:`TokenScenario` holds ``R`` rows over ``V`` tokens and one value per row of each parameter its
processing applies. A call of the sampler hands it ``rows_per_call`` outputs, each drawn from a row chosen
uniformly at random (with its own parameters: batches are heterogeneous); a sampler that takes ``indices``
gets the whole table once and ``indices`` naming each output's row (rows reused through indices).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ..exact._token_law import TOKEN_STEPS, TokenLaws, TokenProcessing, token_laws

__all__ = ["OFF", "TokenScenario", "default_draft_battery", "default_token_battery", "round_to_dtype"]

#: The value of each step that turns it off (temperature 1 divides by one).
OFF = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0}
#: Largest probability cells (outputs x V) one call hands a sampler that takes no ``indices``: 2^21 float64
#: cells are 16 MB, past which building and fingerprinting the inputs costs more than a cheap kernel's work.
CALL_CELLS = 1 << 21
#: Outputs per call of the battery's scenarios: large calls (a token sampler is cheap per row), so the
#: checker's per-call work is spread over many samples.
ROWS_PER_CALL = 1 << 16


def round_to_dtype(values, dtype: str | None) -> np.ndarray:
    """``values`` (float64) rounded to the serving ``dtype`` ("float32", "float16", "bfloat16"; None: as is),
    returned as float64: the values a kernel in that dtype is handed. bfloat16 rounds to nearest even on the
    top 16 bits of the float32 pattern (as ``torch.bfloat16`` does)."""
    values = np.asarray(values, dtype=np.float64)
    if dtype in (None, "float64"):
        return values
    if dtype in ("float32", "float16"):
        return values.astype(dtype).astype(np.float64)
    if dtype == "bfloat16":
        bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
        finite = np.isfinite(values)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        out = np.where(finite, rounded, bits).astype(np.uint32).view(np.float32).astype(np.float64)
        return out
    raise ValueError(f"dtype must be None, 'float64', 'float32', 'float16' or 'bfloat16'; got {dtype!r}.")


@dataclass(frozen=True, eq=False)
class TokenScenario:
    """One table of rows for a token sampler (see the module docstring).

    ``values`` float64 [R, V]: logits (``-inf`` masks a token) or probabilities, as the processing's
    ``inputs`` says; ``params``: one array [R] per step of ``processing.order`` (see :data:`OFF`);
    ``dtype``: the serving dtype the values were rounded to (informative: the values are exactly
    representable in it); ``rows_per_call``: outputs per call.
    """

    name: str
    values: np.ndarray
    params: dict
    processing: TokenProcessing
    rows_per_call: int = ROWS_PER_CALL
    description: str = ""
    dtype: str | None = None
    notes: tuple = field(default=())

    def __post_init__(self):
        values = np.asarray(self.values, dtype=np.float64)
        if values.ndim != 2:
            raise ValueError(f"scenario {self.name!r}: values must be [R, V]; got shape {values.shape}.")
        params = {step: np.asarray(self.params.get(step, np.full(values.shape[0], OFF[step])))
                  for step in self.processing.order}
        extra = sorted(set(self.params) - set(self.processing.order))
        if extra:
            raise ValueError(f"scenario {self.name!r} sets {extra}, which the processing "
                             f"{self.processing.describe()} does not apply.")
        if not isinstance(self.rows_per_call, int) or self.rows_per_call < 1:
            raise ValueError(f"rows_per_call must be an int >= 1; got {self.rows_per_call!r}.")
        values.setflags(write=False)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "params", params)
        token_laws(values, processing=self.processing, **params)  # validates the table now, not in a call

    def __repr__(self) -> str:  # Hypothesis prints falsifying tables: one line, the numbers that matter
        params = ", ".join(f"{k}={v.tolist()}" for k, v in self.params.items())
        return f"TokenScenario({self.name!r}, values={self.values.tolist()}, {params})"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self))

    def source(self) -> str:
        """Python that rebuilds this table (for repro lines): values, parameters and processing."""
        values = self.values.tolist()
        return (f"TokenScenario({self.name!r}, np.array({values!r}), "
                f"{ {k: v.tolist() for k, v in self.params.items()}!r}, {self.processing!r}, "
                f"rows_per_call={self.rows_per_call})").replace("inf", "float('inf')")

    @property
    def rows(self) -> int:
        return self.values.shape[0]

    @property
    def vocab_size(self) -> int:
        return self.values.shape[1]

    @property
    def gamma(self) -> int:  # the report's scenario table has a gamma column: a token sampler drafts nothing
        return 0

    def calls_cells(self, outputs: int) -> int:
        """Probability cells one call of ``outputs`` outputs hands the sampler."""
        return (self.rows if self.processing.indices else outputs) * self.vocab_size

    def outputs_per_call(self) -> int:
        """Outputs per call, so that a call without ``indices`` hands at most :data:`CALL_CELLS` cells."""
        if self.processing.indices:
            return self.rows_per_call
        return int(max(1, min(self.rows_per_call, CALL_CELLS // self.vocab_size)))

    @functools.lru_cache(maxsize=4)
    def laws(self, cast=None) -> TokenLaws:
        """The exact laws of the rows as a kernel is handed them (``cast``: the backend's rounding of the values,
        a hashable callable; None: as stored)."""
        values = self.values if cast is None else cast(self.values)
        return token_laws(values, processing=self.processing, **self.params)

    def describe_row(self, row: int) -> str:
        """A row and its parameters in words, for findings."""
        parts = [f"{step}={self.params[step][row].item():g}" for step in self.processing.order]
        return f"row {row} ({', '.join(parts)})" if parts else f"row {row}"


# --------------------------------------------------------------------------- the battery

def _params(processing, rows, **given) -> dict:
    """Per-row parameters for the steps the processing applies (others dropped), off where not given."""
    out = {}
    for step in processing.order:
        value = given.get(step, OFF[step])
        out[step] = np.resize(np.asarray(value, dtype=np.float64 if step != "top_k" else np.int64), rows)
    return out


def _values(processing, logits):
    """The table as the processing takes it: logits, or their softmax for a sampler of probabilities."""
    logits = np.asarray(logits, dtype=np.float64)
    if processing.inputs == "logits":
        return logits
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _log(probs):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(probs, dtype=np.float64))


def _scenario(processing, name, logits, description, *, exact_probs=None, **params) -> TokenScenario:
    """A scenario of ``logits`` (or, for a sampler of probabilities, ``exact_probs`` where the rows' laws are
    exact binary fractions that every dtype represents: boundaries that land exactly on them)."""
    values = exact_probs if (exact_probs is not None and processing.inputs == "probs") else _values(processing,
                                                                                                    logits)
    values = np.asarray(values, dtype=np.float64)
    return TokenScenario(name, values, _params(processing, values.shape[0], **params), processing,
                         description=description)


def default_token_battery(processing: TokenProcessing = TokenProcessing()) -> list:
    """The default scenarios for a sampler of ``processing`` (built once per processing).

    Every row is tested against its exact processed law; rows whose boundary the declared rules leave to the
    kernel (a tie under ``ties='any'``, a margin within rounding) are tested on their support only. The
    parameters a processing does not apply stay off.
    """
    return list(_battery(processing))


@functools.lru_cache(maxsize=16)
def _battery(processing: TokenProcessing) -> tuple:
    rng = np.random.default_rng(20261204)
    uses = set(processing.order)
    scenarios = []
    has_t, greedy = "temperature" in uses, processing.greedy

    # Heterogeneous rows at V = 16: every step on and off, one greedy row where the sampler has a temperature.
    logits = rng.normal(0.0, 2.0, size=(12, 16))
    temperature = [0.7, 1.0, 1.5] * 4
    if greedy:
        temperature[-1] = 0.0
    scenarios.append(_scenario(processing, "heterogeneous-v16", logits,
                               "12 rows of V = 16, each with its own temperature, top-k, top-p and min-p (and one "
                               "greedy row): one batch mixes them all",
                               temperature=temperature, top_k=[0, 3, 8, 0, 5, 0, 12, 0, 2, 0, 6, 0],
                               top_p=[1.0, 1.0, 0.9, 0.7, 1.0, 0.5, 1.0, 0.95, 1.0, 0.8, 1.0, 1.0],
                               min_p=[0.0, 0.0, 0.0, 0.1, 0.0, 0.0, 0.05, 0.0, 0.0, 0.2, 0.0, 0.02]))

    # Exact ties at the top-k boundary (bf16 logits make them common): [0.4, 0.3, 0.3, 0] at k = 2 is
    # FlashInfer #3774's row; the declared rule decides which tied token is kept, or that both are.
    tie_probs = np.array([[0.4, 0.3, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0],
                          [0.25, 0.25, 0.25, 0.125, 0.125, 0.0, 0.0, 0.0],
                          [0.5, 0.125, 0.125, 0.125, 0.125, 0.0, 0.0, 0.0]])
    tie_logits = _log(tie_probs)  # -inf masks the tokens of probability 0
    if "top_k" in uses:
        scenarios.append(_scenario(processing, "top-k-ties", tie_logits,
                                   "ties at the top-k boundary: [0.4, 0.3, 0.3, 0] at k = 2 (FlashInfer #3774), "
                                   "three tied at k = 2, four tied at k = 3",
                                   exact_probs=tie_probs, top_k=[2, 2, 3]))
    if "top_p" in uses:
        boundary = np.array([[0.5, 0.25, 0.125, 0.125, 0.0, 0.0, 0.0, 0.0],
                             [0.5, 0.25, 0.125, 0.125, 0.0, 0.0, 0.0, 0.0],
                             [0.25, 0.25, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0],
                             [0.5, 0.125, 0.125, 0.125, 0.125, 0.0, 0.0, 0.0]])
        logits_b = _log(boundary)
        scenarios.append(_scenario(processing, "top-p-boundary", logits_b,
                                   "mass exactly at top_p (0.75 = 0.5 + 0.25: the third token is out), just past it "
                                   "(0.8: it is in), and ties at the boundary (four tokens of 0.25 at top_p 0.6; "
                                   "four of 0.125 at 0.7)",
                                   exact_probs=boundary, top_p=[0.75, 0.8, 0.6, 0.7]))
    if "min_p" in uses:
        minp = np.array([[0.5, 0.25, 0.25, 0.0], [0.5, 0.25, 0.125, 0.125], [0.25, 0.25, 0.25, 0.25]])
        logits_m = _log(minp)
        scenarios.append(_scenario(processing, "min-p-boundary", logits_m,
                                   "min-p exactly at a token (0.25 = 0.5 x 0.5: kept), just above the smallest "
                                   "(0.3: 0.125 dropped), and a flat row (everything kept)",
                                   exact_probs=minp, min_p=[0.5, 0.3, 1.0]))

    if greedy:  # greedy rows with tied maxima: the declared greedy rule decides (argmax: the lowest index)
        ties = np.array([[1.0, 3.0, 3.0, 0.5, 3.0, -1.0], [2.0, 2.0, 2.0, 2.0, 2.0, 2.0], [0.0, 5.0, 1.0, 5.0, 2.0, 1.0],
                         [4.0, 1.0, 0.0, 2.0, 3.0, 1.5]])
        scenarios.append(_scenario(processing, "greedy-ties", ties,
                                   "greedy rows (temperature 0) whose largest logit is tied (3 ways, 6 ways, 2 ways), "
                                   "and one sampled row beside them", temperature=[0.0, 0.0, 0.0, 1.0]))

    # Degenerate laws: one-hot (one finite logit), all equal, very negative logits, an extreme temperature.
    v = 32
    one_hot = np.full(v, -np.inf)
    one_hot[7] = 0.0
    flat = np.zeros(v)
    negative = -1e4 + rng.normal(0.0, 1.0, size=v)
    peaked = rng.normal(0.0, 1.0, size=v)
    peaked[3] += 12.0
    rows = np.stack([one_hot, flat, negative, peaked])
    scenarios.append(_scenario(processing, "degenerate-rows", rows,
                               "a one-hot row (one finite logit), an all-equal row, logits near -1e4, and a peaked "
                               "row at a high temperature",
                               temperature=[1.0, 1.0, 1.0, 4.0] if has_t else OFF["temperature"],
                               top_k=[0, 5, 4, 0], top_p=[1.0, 0.9, 1.0, 0.99]))

    # Two tokens: the smallest vocabulary.
    scenarios.append(_scenario(processing, "binary", np.array([[0.0, 1.0], [2.0, -1.0], [0.3, 0.3]]),
                               "V = 2: three rows, one of them flat", top_p=[1.0, 0.9, 1.0],
                               temperature=[1.0, 0.5, 2.0] if has_t else OFF["temperature"]))

    # The same logits with different parameters in one batch: a kernel that reads a row's parameter from
    # another row (FlashInfer #5346 with rows reused through indices) moves mass between the rows' laws.
    shared = np.tile(rng.normal(0.0, 1.5, size=(1, 24)), (6, 1))
    scenarios.append(_scenario(processing, "shared-logits-own-parameters", shared,
                               "six rows of identical logits (V = 24), each with its own parameters: a parameter "
                               "read from the wrong row changes the law",
                               temperature=[0.5, 1.0, 2.0, 0.8, 1.2, 1.0], top_k=[0, 2, 0, 6, 0, 12],
                               top_p=[1.0, 1.0, 0.6, 1.0, 0.9, 1.0], min_p=[0.0, 0.0, 0.0, 0.0, 0.0, 0.3]))

    # Realistic magnitudes in a serving dtype: bf16 logits of magnitude ~60 at temperature 0.3 (DeepSpec #31's
    # regime), where rounding to bf16 creates ties (declared rule) and the law is sharp.
    big = round_to_dtype(60.0 + rng.normal(0.0, 1.5, size=(4, 64)), "bfloat16")
    scenario = _scenario(processing, "bf16-logits", big,
                         "bf16 logits of magnitude ~60 (exact bf16 values: ties from rounding) at temperature 0.3",
                         temperature=[0.3, 0.3, 0.6, 1.0] if has_t else OFF["temperature"], top_k=[0, 20, 0, 8],
                         top_p=[1.0, 1.0, 0.9, 1.0])
    scenarios.append(TokenScenario(scenario.name, scenario.values, scenario.params, processing,
                                   description=scenario.description, dtype="bfloat16"))

    # A support of about 1,000 cells: the largest the default mode certifies at TV 1e-3.
    scenarios.append(_scenario(processing, "vocab-1000", rng.normal(0.0, 1.0, size=(2, 500)),
                               "two rows of V = 500, no truncation on one and top-p 0.95 on the other: ~1,000 cells",
                               top_p=[1.0, 0.95]))

    # Qwen2's vocabulary: truncation keeps the supports small enough to count per token.
    wide = rng.normal(0.0, 1.0, size=(2, 152_064)).astype(np.float32).astype(np.float64)
    wide[:, :64] += 8.0
    scenarios.append(_scenario(processing, "vocab-152064", wide,
                               "V = 152,064 (Qwen2): top-k 40 on one row, top-p 0.5 on a peaked row",
                               top_k=[40, 0], top_p=[1.0, 0.5] if "top_p" in uses else OFF["top_p"]))
    return tuple(scenarios)


def default_draft_battery(processing: TokenProcessing) -> list:
    """The default scenarios of a drafter's sampler (:func:`specdec_check.checker.check_draft_consistency`): float32
    logits of a served model's magnitude (~60, spread ~2), not representable in bf16, at temperatures 0.3 and 1
    (a bf16 sampling path moves their law by ~0.1 and ~1e-3 in TV: deepseek-ai/DeepSpec #31), and generic
    rows of V = 32; the steps the processing applies besides temperature stay off."""
    rng = np.random.default_rng(31)
    served = (60.0 + rng.normal(0.0, 2.0, size=(4, 256))).astype(np.float32).astype(np.float64)
    generic = rng.normal(0.0, 1.5, size=(6, 32))
    has_t = "temperature" in processing.order
    return [
        _scenario(processing, "served-logits-t0.3", served, "float32 logits of magnitude ~60 over V = 256 at "
                  "temperature 0.3", temperature=0.3 if has_t else OFF["temperature"]),
        _scenario(processing, "served-logits-t1", served, "the same logits at temperature 1",
                  temperature=1.0 if has_t else OFF["temperature"]),
        _scenario(processing, "generic-v32", generic, "six rows of V = 32 at temperatures 0.5 to 1.5",
                  temperature=[0.5, 0.8, 1.0, 1.2, 1.5, 1.0] if has_t else OFF["temperature"]),
    ]
