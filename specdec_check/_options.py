"""The one table of options: each is defined here once, and the API, the command line and the pytest
plugin are built from it.

An :class:`Option` names its API keyword, its default, its help, which sampler kinds take it, its
command-line flag (with argparse's keywords), its pytest option (environment variable and ini key
follow from it: ``--specdec-alpha`` is ``SPECDEC_ALPHA`` and ``specdec_alpha``) and the validator of
an API value (a function here, or ``"module:function"`` for one that needs the checker, imported when
used). :func:`specdec_check.checker.core.options.check_options` validates through it, the CLI adds
its flags from :func:`cli_options`, the plugin its options from :func:`plugin_options`, and a test
checks that every ``check_*`` signature has exactly the table's keywords and defaults.

This module imports nothing but the standard library and :mod:`specdec_check._settings`: the
pytest plugin and the command line read it before anything heavy loads.
"""

from __future__ import annotations

import argparse
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path

from ._settings import (BACKENDS, DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_RULE, DEFAULT_SEED,
                        DEFAULT_TIMEOUT_S, DRAFTING_SCHEMES, KINDS, MODES, RULES, TIE_RULES, TOKEN_INPUTS, TOKEN_STEPS,
                        get_mode, open_unit)

__all__ = ["CHECK_KINDS", "OPTIONS", "REPORT_FORMATS", "Option", "api_options", "cli_options", "plugin_options",
           "positive_int", "probability", "seconds", "seed_value"]

#: Every sampler kind the checker runs.
CHECK_KINDS = tuple(KINDS)
REPORT_FORMATS = ("json", "md", "html")


# --------------------------------------------------------------------------- parsers of command-line text

def seed_value(text):
    """A non-negative integer from the command line."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer; got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer; got {text!r}")
    return value


def positive_int(text):
    value = seed_value(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a positive integer; got 0")
    return value


def seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value >= 0.0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0 (0: no limit); got {text!r}")
    return value


def probability(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1); got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1); got {text!r}")
    return value


def check_names(text):
    names = tuple(c.strip() for c in text.split(",") if c.strip())
    if not names:
        raise argparse.ArgumentTypeError("expected a comma-separated list of check names")
    return names


def step_names(text):
    """``"temperature,top_k"`` -> ``("temperature", "top_k")``: a token sampler's processing order."""
    names = tuple(c.strip() for c in text.split(",") if c.strip())
    bad = [n for n in names if n not in TOKEN_STEPS]
    if bad or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"expected distinct steps among {','.join(TOKEN_STEPS)} in the sampler's "
                                         f"order (comma-separated); got {text!r}")
    return names


def formats(text, choices=REPORT_FORMATS):
    """``"md,html"`` -> ``("md", "html")``: a comma-separated list of report formats among ``choices``."""
    names = tuple(c.strip() for c in text.split(",") if c.strip())
    bad = [n for n in names if n not in choices]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"choose from {','.join(choices)} (comma-separated); got {text!r}")
    return names


def rendered_formats(text):
    """The formats ``specdec-check report`` renders again (report.json is the input): md, html."""
    return formats(text, tuple(f for f in REPORT_FORMATS if f != "json"))


# --------------------------------------------------------------------------- validators of API values

def _seed(value, **_):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"seed must be an int >= 0; got {value!r}.")
    return int(value)


def _alpha(value, **_):
    return open_unit(value, "alpha (the false-alarm budget of the whole run)")


def _mode(value, **_):
    return get_mode(value)


def _progress(value, **_):
    if value is not None and not callable(value):
        raise TypeError("progress must be None or a callable progress(done, total, label).")
    return value


def _strict(value, **_):
    if not isinstance(value, bool):
        raise TypeError(f"strict must be True or False; got {value!r}.")
    return value


def _rule(value, *, kind, **_):
    rules = KINDS[kind].rules
    if value in RULES and value not in rules:  # a known rule this kind has no test for: not the user's mistake
        raise NotImplementedError(f"rule={value!r} (the rule-agnostic exactness test) is not built for the "
                                  f"{kind.replace('_', ' ')} kind yet; use rule={rules[0]!r}.")
    if value not in rules:
        raise ValueError(f"rule must be one of {rules} for the {kind.replace('_', ' ')} kind; got {value!r} "
                         "('standard': Leviathan et al.'s rule exactly, or the tree scheme's reference rule; 'any': "
                         "any lossless rule, such as block verification).")
    return value


def _name(value, **_):
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise TypeError(f"name must be None or the sampler's MODULE:CALLABLE path; got {value!r}.")
    return None if value is None else value.strip()


def _drafting(value, **_):
    if value is not None and value not in DRAFTING_SCHEMES:
        raise ValueError(f"drafting must be one of {DRAFTING_SCHEMES} (how the tree's children were drafted: "
                         f"independently, without replacement, or the deterministic top-k); got {value!r}.")
    return value


# --------------------------------------------------------------------------- the table

@dataclass(frozen=True)
class Option:
    """One option (see the module docstring). ``api``: a keyword of the ``check_*`` functions; ``flag``: the
    command line's (None: none), with argparse's ``cli`` keywords; ``cli_kinds``: the kinds whose subcommand
    shows it (default: ``kinds``); ``plugin``: the pytest option (None: none) with its ``plugin_kwargs``."""

    name: str
    default: object
    help: str
    kinds: tuple = CHECK_KINDS
    api: bool = True
    validate: object = None
    flag: str | None = None
    cli: dict = field(default_factory=dict)
    cli_kinds: tuple | None = None
    group: str | None = None
    plugin: str | None = None
    plugin_kwargs: dict = field(default_factory=dict)

    @property
    def env(self) -> str | None:
        return None if self.plugin is None else self.plugin.lstrip("-").replace("-", "_").upper()

    @property
    def ini(self) -> str | None:
        return None if self.plugin is None else self.plugin.lstrip("-").replace("-", "_")

    def validator(self):
        """The validator as a callable (imported now when it is a ``"module:function"`` path)."""
        if isinstance(self.validate, str):
            import pkgutil

            return pkgutil.resolve_name(self.validate)
        return self.validate

    def shown_for(self, kind: str) -> bool:
        return kind in (self.cli_kinds if self.cli_kinds is not None else self.kinds)


_CHECKER = "specdec_check.checker.core.options"
_TREE, _RAGGED, _TOKEN, _GENERATOR = ("tree_verifier",), ("ragged_verifier",), ("token_sampler",), ("generator",)
_RULED = ("verifier", "tree_verifier", "ragged_verifier")

OPTIONS = (
    Option("scenarios", None, "a scenario list, or a callable returning one (default: the built-in battery)",
           flag="--scenarios", cli={"metavar": "MODULE:ATTR"}),
    Option("drafting", None, "how the drafter chooses a node's children: independently, without replacement, or the "
           "deterministic top-k (default: the callable's .drafting attribute; the command line says which it used)",
           kinds=_TREE, validate=_drafting, flag="--drafting", cli={"choices": DRAFTING_SCHEMES}),
    Option("processing", None, "the declared order of temperature, top-k, top-p and min-p (a SamplingProcessing; "
           "default: vLLM v1's, or the scenarios'; for a token sampler a TokenProcessing, default: the callable's "
           ".processing attribute)", kinds=_RAGGED + _TOKEN),
    Option("inputs", None, "what the token sampler takes: logits (temperature applies) or probs (default: the "
           "callable's .processing, else logits)", kinds=_TOKEN, api=False, flag="--inputs",
           cli={"choices": TOKEN_INPUTS}),
    Option("order", None, "the steps the token sampler takes and applies, in its order (default: the callable's "
           ".processing, else temperature,top_k,top_p)", kinds=_TOKEN, api=False, flag="--order",
           cli={"type": step_names, "metavar": "STEP[,STEP...]"}),
    Option("ties", None, "how a tie at the top-k or top-p boundary is decided: keep every tied token, the lowest or "
           "highest index first, or any (the kernel's sort decides: such rows are judged on their support only)",
           kinds=_TOKEN, api=False, flag="--ties", cli={"choices": TIE_RULES}),
    Option("indices", False, "the token sampler takes indices [B] (output i drawn from row indices[i], FlashInfer's "
           "convention)", kinds=_TOKEN, api=False, flag="--indices", cli={"action": "store_true"}),
    # -- a decode loop on your own model pair (the target is the oracle; issue 26) --------------------------
    Option("target", None, "your target model (a transformers causal LM, or any tokens -> logits callable): the loop "
           "is handed it, and its own uncached forward pass is the exact law (command line: MODULE:CALLABLE "
           "building it)", kinds=_GENERATOR, flag="--target-model", cli={"metavar": "MODULE:CALLABLE"}),
    Option("draft", None, "your draft model, handed to the loop with the target", kinds=_GENERATOR,
           flag="--draft-model", cli={"metavar": "MODULE:CALLABLE"}),
    Option("oracle", None, "the target's laws as the loop samples them (specdec_check.models.from_hf_model(target, "
           "top_k=...)); default: from_hf_model(target), the processing its generation_config declares",
           kinds=_GENERATOR),
    Option("prompts", None, "prompts of the model pair's scenario (token strings); default: 8 random ones",
           kinds=_GENERATOR),
    Option("max_new_tokens", 8, "new tokens per row on the model pair", kinds=_GENERATOR),
    Option("gamma", 3, "drafts per step on the model pair", kinds=_GENERATOR),
    Option("rows_per_call", 1, "prompts per call on the model pair (1 for loops of batch size 1)", kinds=_GENERATOR),
    Option("eos_token_id", None, "a stop token: a row ends at it, -1 after", kinds=_GENERATOR),
    Option("mode", DEFAULT_MODE, "how hard to look (default: %(default)s)", validate=_mode, flag="--mode",
           cli={"choices": tuple(MODES)}),
    Option("tv", None, "target resolution: size the law tests to detect this total-variation distance (e.g. --mode "
           "thorough --tv 1e-3 plans ~4.5e7 rows per scenario, which verifier and tree scenarios run as ~170 shards "
           "that --workers or --scheduler spread); default: the mode's own", api=False, flag="--tv",
           cli={"type": probability, "metavar": "TV"}),
    Option("backend", DEFAULT_BACKEND, "array backend the sampler uses (default: %(default)s)", flag="--backend",
           cli={"choices": BACKENDS}, plugin="--specdec-backend", plugin_kwargs={"metavar": "NAME", "choices": BACKENDS},
           validate=f"{_CHECKER}:backend_option"),
    Option("device", None, "torch device for the sampler's inputs, e.g. cuda:0 (torch backend)", flag="--device",
           plugin="--specdec-device", plugin_kwargs={"metavar": "DEVICE"}),
    Option("dtype", None, "dtype of the probabilities handed to the sampler, e.g. float32 (default: the backend's)",
           flag="--dtype", plugin="--specdec-dtype", plugin_kwargs={"metavar": "DTYPE"}),
    Option("seed", DEFAULT_SEED, "seed of the whole run (default: %(default)s)", validate=_seed, flag="--seed",
           cli={"type": seed_value}),
    Option("alpha", DEFAULT_ALPHA, "false-alarm budget of the whole run (default: %(default)g)", validate=_alpha,
           flag="--alpha", cli={"type": probability}, plugin="--specdec-alpha", plugin_kwargs={"metavar": "ALPHA"}),
    Option("rule", DEFAULT_RULE, "judge against the standard rule (Leviathan et al. 2023; for trees the scheme's "
           "reference rule; default) or any lossless rule (block verification, sampled match, traversal "
           "verification, ...: only exactness decides)", kinds=_RULED, cli_kinds=("verifier", "tree_verifier"),
           validate=_rule, flag="--rule", cli={"choices": RULES}, plugin="--specdec-rule",
           plugin_kwargs={"metavar": "RULE", "choices": RULES}),
    Option("strict", False, "count robustness and edge-case warnings (NaN input rows, degenerate shapes, coins of "
           "exactly 0) as failures", validate=_strict, flag="--strict", cli={"action": "store_true"},
           plugin="--specdec-strict", plugin_kwargs={"action": "store_const", "const": "true"}),
    Option("checks", None, "run only these checks (default: the kind's default checks under the rule)",
           flag="--checks", cli={"type": check_names, "metavar": "NAME[,NAME...]"}),
    Option("progress", None, "a callable progress(done, total, label), or None", validate=_progress),
    Option("name", None, "the sampler's MODULE:CALLABLE, for the report and its repro lines (default: found "
           "from the sampler where it imports back)", validate=_name),
    Option("monitor", None, "told about every sampler call and every finished scenario (the supervised command "
           "line's channel), or None", validate=f"{_CHECKER}:monitor_option"),
    Option("executor", None, "where the scenarios run: None (this process), 'processes' or N (a local process pool), "
           "or a concurrent.futures.Executor (Dask: Client(address).get_executor())",
           validate=f"{_CHECKER}:executor_option"),
    # -- the command line's own ----------------------------------------------------------------------------
    Option("scenario_names", None, "run only the scenario(s) of this name; repeatable (e.g. to reproduce a finding)",
           api=False, flag="--scenario", cli={"action": "append", "metavar": "NAME"}),
    Option("report", None, "report folder, checked before the run (default: reports/<MODULE.CALLABLE>-<mode>-"
           "seed<seed>)", api=False, flag="--report", cli={"metavar": "DIR", "type": Path}),
    Option("force", False, "replace the report of another run in the report folder", api=False, flag="--force",
           cli={"action": "store_true"}),
    Option("formats", REPORT_FORMATS, "report files to write: json,md,html (default: all)", api=False,
           flag="--format", cli={"type": formats, "metavar": "FMT[,FMT...]"}),
    Option("no_report", False, "write no report files", api=False, flag="--no-report", cli={"action": "store_true"}),
    Option("no_plots", False, "leave the figures out of report.html", api=False, flag="--no-plots",
           cli={"action": "store_true"}),
    Option("no_progress", False, "no progress bar", api=False, flag="--no-progress", cli={"action": "store_true"}),
    Option("timeout", DEFAULT_TIMEOUT_S, "limit on one call of the sampler; a call past it stops the run with a 'timeout' finding "
           "and a partial report (default: %(default)g; 0: no limit)", api=False, flag="--timeout",
           cli={"type": seconds, "metavar": "SECONDS"}),
    Option("quiet", False, "print only the verdict line", api=False, flag="--quiet",
           cli={"action": "store_true", "short": "-q"}),
    Option("workers", 1, "run the scenarios in N local processes (default: 1, in this process); the report is the "
           "same, timings aside. --timeout does not reach worker processes", api=False, flag="--workers",
           cli={"type": positive_int, "metavar": "N"}, group="scale"),
    Option("scheduler", None, "run the scenarios on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786; "
           "needs pip install distributed); the report is the same, timings aside", api=False, flag="--scheduler",
           cli={"metavar": "ADDRESS"}, group="scale"),
    # -- the pytest plugin's own ---------------------------------------------------------------------------
    Option("degenerate", False, "also draw degenerate shapes (gamma = 0, V = 1), outside the contract's main domain",
           api=False, plugin="--specdec-degenerate", plugin_kwargs={"action": "store_const", "const": "true"}),
)

_BY_NAME = {option.name: option for option in OPTIONS}


def option(name: str) -> Option:
    return _BY_NAME[name]


def api_options(kind: str) -> tuple:
    """The options a ``check_*`` function of ``kind`` takes, in table order."""
    return tuple(o for o in OPTIONS if o.api and kind in o.kinds)


def cli_options(kind: str) -> tuple:
    """The options the subcommand of ``kind`` shows, in table order."""
    return tuple(o for o in OPTIONS if o.flag is not None and o.shown_for(kind))


def plugin_options() -> tuple:
    """The pytest plugin's options (besides one per sampler kind), in table order."""
    return tuple(o for o in OPTIONS if o.plugin is not None)
