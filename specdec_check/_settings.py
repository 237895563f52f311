"""The one table of settings that the API, the command line and the pytest plugin share.

Modes, backends, defaults (alpha, seed), the bundled reference samplers, the sampler kinds'
names, and the resolution of ``MODULE:CALLABLE`` paths. This module imports nothing but the
standard library: the pytest plugin reads it in every pytest run of an environment where the
package is installed, and must stay free there.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass

__all__ = [
    "BACKENDS",
    "DEFAULT_ALPHA",
    "DEFAULT_BACKEND",
    "DEFAULT_MODE",
    "DEFAULT_SEED",
    "DEFAULT_TIMEOUT_S",
    "DRAFTING_SCHEMES",
    "KINDS",
    "TIE_RULES",
    "TOKEN_INPUTS",
    "TOKEN_MODES",
    "TOKEN_STEPS",
    "MODES",
    "RULES",
    "CallableNotFound",
    "KindNames",
    "Mode",
    "mode_for_tv",
    "open_unit",
    "target_tv",
    "default_sampler",
    "get_mode",
    "resolve_callable",
]


@dataclass(frozen=True)
class Mode:
    """How hard to look: the TV the law tests are sized to detect with power 0.99, and caps.

    ``design_tv`` is also the evidence floor: a scenario whose law tests cannot reach it within
    the caps makes the run inconclusive. ``max_samples`` caps one law test of one scenario;
    ``max_law_calls`` and ``max_law_cells`` cap the sampler calls and the probability cells (rows x
    positions x V) of one scenario's law loop, ``max_calls`` and ``max_cells`` those of each other
    check (randomness, batch invariance, target calls); ``pit_bins`` is the resolution of the
    randomized-PIT histograms; ``shard_rows`` the law rows of one shard of a scenario (a law loop
    planning more runs as block ranges of this size, side by side on an executor; see
    :data:`SHARD_ROWS`).
    """

    name: str
    design_tv: float
    max_samples: int
    max_calls: int
    pit_bins: int
    max_cells: float
    max_law_calls: int
    max_law_cells: float
    shard_rows: int = 0  # 0: SHARD_ROWS (set in __post_init__)

    def __post_init__(self):
        if not self.shard_rows:
            object.__setattr__(self, "shard_rows", SHARD_ROWS)
        if isinstance(self.shard_rows, bool) or not isinstance(self.shard_rows, int) or self.shard_rows < 1:
            raise ValueError(f"shard_rows must be an int >= 1 (law rows per shard); got {self.shard_rows!r}.")


#: Law rows one shard of a verifier scenario covers: a law loop planning more is split into block ranges
#: of this many rows (whole calls, whole reused blocks), run as shards (side by side on an executor) and
#: merged in order: counts add and each test's e-process looks at every shard boundary. 2^18 is above every law loop of the quick,
#: default and thorough modes (their tests stop at 6,000, 40,000 and ~1.3e5 samples), so those runs keep
#: one shard per scenario and their reports; ``--tv 1e-3`` makes ~170 per scenario. A shard is ~0.1 to 1 s
#: of a reference's work on one core: small enough to spread and to stop early, large enough that the
#: per-shard setup (tables, the laws of the prompt pool) stays a few per cent.
SHARD_ROWS = 1 << 18


#: quick: a smoke check in seconds (TV 0.15 with 16 PIT bins needs ~1.8k samples per test);
#: default: under a minute on two cores for the whole battery (TV 0.06, 32 bins: ~12k samples);
#: thorough: minutes per scenario (TV 0.02, 64 bins: ~1.3e5 samples per test).
#: The law-loop caps let a scenario of one row per call reach the design TV (one call per sample,
#: with room to spare) while bounding what a huge-vocabulary scenario hands over: past 2e9 cells
#: (16 GB of float64) in default mode a scenario is inconclusive instead of slow.
MODES = {
    "quick": Mode("quick", design_tv=0.15, max_samples=6_000, max_calls=120, pit_bins=16, max_cells=2e7,
                  max_law_calls=3_000, max_law_cells=5e8),
    "default": Mode("default", design_tv=0.06, max_samples=40_000, max_calls=600, pit_bins=32, max_cells=3e8,
                    max_law_calls=20_000, max_law_cells=2e9),
    "thorough": Mode("thorough", design_tv=0.02, max_samples=2_000_000, max_calls=50_000, pit_bins=64,
                     max_cells=1e10, max_law_calls=400_000, max_law_cells=5e10),
}
DEFAULT_MODE = "default"

#: Outputs one shard of a token scenario covers: 2^24 is 256 calls of 65,536 outputs, 3 to 8 s of the numpy
#: reference's and the checker's work on one core (the per-shard setup, the scenario's laws, is a few per cent);
#: default mode's ~1.5e8-output scenario runs as 9 shards, quick mode's scenarios whole.
TOKEN_SHARD_ROWS = 1 << 24
#: The same modes for a token sampler (temperature / top-k / top-p / min-p kernels): one output is a sample,
#: and a kernel draws millions a second, so its law is held to a far smaller TV: 1e-2 (quick), 1e-3 (default:
#: ~5e7 outputs for 100 cells, ~1.2e8 for 1,000; samples_for at alpha 1e-8), 3e-4 (thorough). The law loop may
#: hand over 2e10 probability cells in default mode (a kernel without ``indices`` gets a row per output: V = 500
#: at 4,096 outputs a call is 2e6 cells a call, 1e4 calls); randomness checks spend at most max_calls calls.
TOKEN_MODES = {
    "quick": Mode("quick", design_tv=1e-2, max_samples=3_000_000, max_calls=40, pit_bins=32, max_cells=1e9,
                  max_law_calls=2_000, max_law_cells=2e9, shard_rows=TOKEN_SHARD_ROWS),
    "default": Mode("default", design_tv=1e-3, max_samples=300_000_000, max_calls=40, pit_bins=64, max_cells=1e10,
                    max_law_calls=20_000, max_law_cells=2e10, shard_rows=TOKEN_SHARD_ROWS),
    "thorough": Mode("thorough", design_tv=3e-4, max_samples=3_000_000_000, max_calls=40, pit_bins=128,
                     max_cells=1e11, max_law_calls=200_000, max_law_cells=2e11, shard_rows=TOKEN_SHARD_ROWS),
}

#: Array backends: numpy (float64 on the CPU) and torch (any device and dtype).
BACKENDS = ("numpy", "torch")
DEFAULT_BACKEND = "numpy"

#: False-alarm budget of one whole run: the probability that an exact sampler fails anything.
#: 1e-6 keeps a CI that runs the checker a thousand times a day below one false alarm in three
#: years, and costs only x1.2-1.4 samples over 1e-3 (statistics.md, section 0, finding 4).
DEFAULT_ALPHA = 1e-6
DEFAULT_SEED = 0

#: What a verifier is judged against: "standard" (Leviathan et al. 2023, Algorithm 1: every
#: deviation from the rule is a finding) or "any" (only exactness: block verification and every
#: other lossless rule pass; the rule-agnostic completion tests decide).
RULES = ("standard", "any")
DEFAULT_RULE = RULES[0]

#: How a tree verifier's drafter chooses a node's children: independently (SpecInfer, Medusa-style
#: sampling), without replacement (EAGLE-1; recursive rejection sampling) or the deterministic top-k
#: (EAGLE-2/3, SGLang). Each scheme's reference rule carries the scheme's name
#: (:data:`specdec_check.exact.RULES`); the last is the default of the command line.
DRAFTING_SCHEMES = ("iid", "without_replacement", "topk")

#: A token sampler's processing steps (each at most once, in its declared order), what it is handed, and how a
#: tie at a boundary is decided (:class:`specdec_check.exact.TokenProcessing`).
TOKEN_STEPS = ("temperature", "top_k", "top_p", "min_p")
TOKEN_INPUTS = ("logits", "probs")
TIE_RULES = ("keep", "low_index", "high_index", "any")


@dataclass(frozen=True)
class KindNames:
    """How one sampler kind is named on each surface: API word, CLI subcommand, plugin setting, and the
    rules it can be judged under (a prefix of :data:`RULES`)."""

    kind: str
    command: str
    option: str
    env: str
    ini: str
    defaults: tuple  # ((backend, MODULE:CALLABLE), ...): the bundled reference per backend
    rules: tuple = RULES[:1]
    role: str = ""  # what the sampler is, in words ("decode loop")


KINDS = {
    "verifier": KindNames("verifier", "verify", "--specdec-verifier", "SPECDEC_VERIFIER", "specdec_verifier",
                          (("numpy", "specdec_check.samplers:numpy_verify"),
                           ("torch", "specdec_check.samplers:torch_verify")), RULES, "verifier"),
    "generator": KindNames("generator", "generate", "--specdec-generator", "SPECDEC_GENERATOR", "specdec_generator",
                           (("numpy", "specdec_check.samplers:numpy_generate"),
                            ("torch", "specdec_check.samplers:torch_generate")), RULES[:1], "decode loop"),
    # The production calling convention (logits in, per-request sampling parameters, ragged batches); the
    # rule-agnostic completion is not built for it yet.
    "ragged_verifier": KindNames("ragged_verifier", "ragged", "--specdec-ragged-verifier", "SPECDEC_RAGGED_VERIFIER",
                                 "specdec_ragged_verifier",
                                 (("numpy", "specdec_check.samplers:numpy_ragged_verify"),
                                  ("torch", "specdec_check.samplers:torch_ragged_verify")), RULES[:1],
                                 "production (logits-in, ragged) verifier"),
    "tree_verifier": KindNames("tree_verifier", "tree", "--specdec-tree-verifier", "SPECDEC_TREE_VERIFIER",
                               "specdec_tree_verifier",
                               (("numpy", "specdec_check.samplers:numpy_verify_tree_topk"),
                                ("torch", "specdec_check.samplers:torch_verify_tree_topk")), RULES, "tree verifier"),
    # Token samplers (temperature / top-k / top-p / min-p kernels), the draft's own sampler among them.
    "token_sampler": KindNames("token_sampler", "sample", "--specdec-token-sampler", "SPECDEC_TOKEN_SAMPLER",
                               "specdec_token_sampler",
                               (("numpy", "specdec_check.samplers:numpy_sample"),
                                ("torch", "specdec_check.samplers:torch_sample")), RULES[:1], "token sampler"),
}

#: Default limit on one sampler call on the command line, in seconds: far above any sane verifier step or
#: decode call on the battery's sizes, short enough that a hung CI job says so within a minute.
DEFAULT_TIMEOUT_S = 60.0


def open_unit(value, what: str, *, hint: str = "") -> float:
    """``value`` as a float in (0, 1); a ValueError naming ``what`` (and ``hint``) otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number in (0, 1); got {value!r}.") from None
    if not 0.0 < number < 1.0:
        raise ValueError(f"{what} must lie in (0, 1); got {number}{hint}.")
    return number


def mode_for_tv(design_tv: float, base="thorough") -> Mode:
    """``base`` (a mode or its name) sized to detect ``design_tv``: the same PIT bins and the same caps on the
    other checks, its law-loop caps (``max_samples``, ``max_law_calls``, ``max_law_cells``) scaled by
    ``(base.design_tv / design_tv)^2``, the rate at which :func:`specdec_check.stats.samples_for` grows
    (identity testing needs ``n ~ sqrt(B) / eps^2``, Diakonikolas & Kane 2016), so the caps do not bind before
    the target resolution does. Its name stays the base's; the report's ``design_tv`` and the repro line's
    ``--tv`` say the target. A bf16 kernel change certified at TV 1e-4 plans ~1e9 rows: run it with an executor.
    """
    base = get_mode(base)
    design_tv = open_unit(design_tv, "the target resolution (tv)", hint=" (e.g. 1e-3)")
    if design_tv == base.design_tv:
        return base
    scale = max(1.0, (base.design_tv / design_tv) ** 2)  # a coarser target keeps the base's caps
    return dataclasses.replace(base, design_tv=design_tv, max_samples=int(base.max_samples * scale),
                               max_law_calls=int(base.max_law_calls * scale), max_law_cells=base.max_law_cells * scale)


def target_tv(mode: Mode) -> float | None:
    """The ``--tv`` a mode was built with (:func:`mode_for_tv`), or None for a named mode as it is.
    ``ValueError`` for a mode built otherwise (its own caps or shards): no command line replays it."""
    for table in (MODES, TOKEN_MODES):  # a token sampler's modes are the named modes of its kind
        named = table.get(mode.name)
        if named is not None and mode == named:
            return None
        if named is not None and mode == mode_for_tv(mode.design_tv, named):
            return float(mode.design_tv)
    raise ValueError(f"{mode!r} is neither a named mode nor mode_for_tv(tv, name): no --mode/--tv replays it.")


def get_mode(mode) -> Mode:
    """The :class:`Mode` named ``mode`` (a Mode passes through); ``ValueError`` naming the choices."""
    if isinstance(mode, Mode):
        return mode
    try:
        return MODES[mode]
    except (KeyError, TypeError):
        raise ValueError(f"unknown mode {mode!r}; choose one of {tuple(MODES)}.") from None


def default_sampler(kind: str, backend: str = DEFAULT_BACKEND) -> str:
    """``MODULE:CALLABLE`` of the bundled reference of ``kind`` on ``backend``."""
    return dict(KINDS[kind].defaults)[backend]


class CallableNotFound(ValueError):
    """A ``MODULE:CALLABLE`` path that does not import, does not exist or is not callable.

    The message says what was wrong and how to fix it; the CLI turns it into a usage error
    (exit 2) and the pytest plugin into ``pytest.UsageError``.
    """


def resolve_callable(path: str, *, what: str = "sampler", source: str = "", require_callable: bool = True):
    """Import ``module:attr`` (or ``module.attr``) and return the object.

    The current directory is importable, as it is for ``python -m`` (console scripts and pytest
    do not add it), so ``mykernels:verify`` works from the folder that holds ``mykernels.py``.
    Raises :class:`CallableNotFound` with what to change.
    """
    import importlib
    import pkgutil

    where = f" (from {source})" if source else ""
    hint = f"Give the {what} as MODULE:CALLABLE, e.g. mypkg.kernels:verify."
    if not isinstance(path, str) or not path.strip():
        raise CallableNotFound(f"empty {what} path{where}. {hint}")
    path = path.strip()
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    module_name = path.partition(":")[0]
    try:
        obj = pkgutil.resolve_name(path)
    except ValueError as exc:
        raise CallableNotFound(f"the {what} {path!r}{where} is not a valid path ({exc}). {hint}") from None
    except ImportError as exc:
        raise CallableNotFound(
            f"cannot import the {what} {path!r}{where}: {type(exc).__name__}: {' '.join(str(exc).split())}. Check the "
            f"spelling and that {module_name.split('.')[0]!r} is installed or in the current directory. {hint}") from None
    except AttributeError as exc:
        if ":" in path:
            module, _, attr = path.partition(":")
            try:
                names = sorted(n for n in dir(importlib.import_module(module)) if not n.startswith("_"))
            except Exception:  # noqa: BLE001 - the module imported a moment ago; the list is a courtesy
                names = []
            shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
            raise CallableNotFound(f"module {module!r} has no attribute {attr!r} (the {what} {path!r}{where}). "
                                   f"Public names there: {shown or '(none)'}.") from None
        raise CallableNotFound(f"cannot resolve the {what} {path!r}{where}: {exc}. {hint}") from None
    except Exception as exc:  # noqa: BLE001 - whatever the user's module raises while importing
        raise CallableNotFound(f"importing the {what} {path!r}{where} raised {type(exc).__name__}: "
                               f"{' '.join(str(exc).split())}") from None
    if require_callable and not callable(obj):
        raise CallableNotFound(f"the {what} {path!r}{where} is a {type(obj).__name__}, not a callable. "
                               f"Point at a function (or an object with __call__). {hint}")
    return obj
