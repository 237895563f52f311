"""The checker: run a sampler on a scenario battery and report what was proven.

Layout (one concern per module): ``_kinds`` (sampler kinds as data), ``_options`` (options
validated once), ``_session`` (one run: plan, alpha ledger, scenarios, report), ``_caller``
(the call protocol), ``_contract`` (the output contract and impossible events), ``_block``
(a call's exact laws), ``_tally`` (streaming law tests), ``checks/`` (one check per module),
``_verdict`` (records to findings), ``_repro`` (repro lines), ``_report`` (the result objects),
``_backend``/``_backends``/``_torch_backend`` (where the sampler runs), ``_verifier``,
``_generator`` and ``_tree`` (the kinds and their public entry points; the tree kind's block,
caller and checks are ``_tree_block``, ``_tree_caller`` and ``checks/_tree_*``).
"""

from .._settings import MODES, Mode, mode_for_tv
from ._backend import Backend, NumpyBackend
from ._backends import make_backend
from ._generator import GENERATOR_CHECKS, check_generator
from ._options import CheckOptions, check_options
from ._ragged import RAGGED_CHECKS, check_ragged_verifier
from ._ragged_probe import ConventionReport, probe_sampling_conventions
from ._report import REPORT_VERSION, CheckReport, Finding, ScenarioSummary, TestRecord
from ._session import run
from ._tree import TREE_CHECKS, TREE_VERIFIER, check_tree_verifier
from ._verifier import VERIFIER, VERIFIER_CHECKS, check_verifier
from ._generator import GENERATOR
from ._ragged import RAGGED_VERIFIER

#: The sampler kinds by name (``SamplerKind`` objects): the CLI and the plugin run them through :func:`run`.
#: The tree kind here is the top-k scheme's; ``tree_verifier_kind(drafting)`` gives the others.
SAMPLER_KINDS = {kind.name: kind for kind in (VERIFIER, GENERATOR, TREE_VERIFIER, RAGGED_VERIFIER)}

__all__ = [
    "GENERATOR_CHECKS",
    "MODES",
    "RAGGED_CHECKS",
    "REPORT_VERSION",
    "SAMPLER_KINDS",
    "TREE_CHECKS",
    "VERIFIER_CHECKS",
    "Backend",
    "CheckOptions",
    "CheckReport",
    "ConventionReport",
    "Finding",
    "Mode",
    "NumpyBackend",
    "ScenarioSummary",
    "TestRecord",
    "check_generator",
    "check_options",
    "check_ragged_verifier",
    "check_tree_verifier",
    "check_verifier",
    "make_backend",
    "mode_for_tv",
    "probe_sampling_conventions",
    "run",
]
