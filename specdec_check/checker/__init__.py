"""The checker: run a sampler on a scenario battery and report what was proven.

The API (:data:`__all__`): one ``check_*`` function per sampler kind, the result objects, the modes.
Layout (``notes/ARCHITECTURE.md`` has the map): ``core/`` is shared by every kind (the one scenario
loop, the guarded call, the policy table, the recorder, plans and outcomes, the session, shards,
options, verdicts, reports); ``checks/`` the checks every verifier kind shares (probes, determinism,
collisions, the rule-agnostic completed law); ``backends/`` where the sampler runs (numpy, torch);
one folder per sampler kind: ``chain/`` (the chain verifier), ``tree/`` (tree verifiers), ``ragged/``
(the production logits-in verifier), ``generator/`` (decode loops), each with its ``kind``,
``caller``, ``block``, ``contract`` and ``laws``; ``token/`` (token samplers: temperature, top-k, top-p,
min-p kernels, and the draft's own sampler against the q it returns).
"""

from .._settings import MODES, Mode, mode_for_tv
from .chain.kind import VERIFIER_CHECKS, check_verifier
from .core.report import REPORT_VERSION, CheckReport, Finding, ScenarioSummary, TestRecord
from .generator.kind import GENERATOR_CHECKS, check_generator
from .ragged.conventions import ConventionReport, probe_sampling_conventions
from .ragged.kind import RAGGED_CHECKS, check_ragged_verifier
from .token.draft import check_draft_consistency
from .token.kind import TOKEN_CHECKS, check_token_sampler
from .tree.kind import TREE_CHECKS, check_tree_verifier

__all__ = [
    "GENERATOR_CHECKS",
    "MODES",
    "RAGGED_CHECKS",
    "REPORT_VERSION",
    "TOKEN_CHECKS",
    "TREE_CHECKS",
    "VERIFIER_CHECKS",
    "CheckReport",
    "ConventionReport",
    "Finding",
    "Mode",
    "ScenarioSummary",
    "TestRecord",
    "check_draft_consistency",
    "check_generator",
    "check_ragged_verifier",
    "check_token_sampler",
    "check_tree_verifier",
    "check_verifier",
    "mode_for_tv",
    "probe_sampling_conventions",
]
