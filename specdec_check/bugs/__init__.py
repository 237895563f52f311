"""A catalogue of buggy speculative-decoding samplers, exact controls, and the mutation score.

``VERIFIER_BUGS`` and ``GENERATOR_BUGS`` hold deliberately wrong verifiers and decode loops
(each one change away from the reference, with its mechanism and the real report it
reproduces where one exists); ``CONTROLS`` holds alternative exact verifiers that must
pass. ``mutation_score()`` runs the checker on all of them; ``TREE_BUGS`` / ``TREE_CONTROLS`` and
``tree_mutation_score()`` do the same for tree verifiers (``specdec-check mutants --trees``). Print the
table with::

    python -c "from specdec_check.bugs import mutation_score, format_mutation_table; print(format_mutation_table(mutation_score()))"

``rule_catalogue()`` holds the verifiers to judge under ``rule="any"`` (lossless non-standard
rules, buggy block verifiers, lossy rules with their knobs), with their exact step laws
(``rule_step_law``) and completed-law TVs (``rule_completed_tv``); they are not in
``catalogue()`` nor in the mutation score yet.
"""

from . import _controls, _decode_loops, _rules, _tree_verifiers, _verifiers
from ._catalogue import CONTROLS, GENERATOR_BUGS, VERIFIER_BUGS, catalogue, entry
from ._entry import CatalogueEntry
from ._controls import *  # noqa: F403  (every sampler is reachable as specdec_check.bugs:<name>)
from ._decode_loops import *  # noqa: F403
from ._rules import *  # noqa: F403
from . import _ragged
from ._ragged import *  # noqa: F403  (the ragged catalogue: bugs of the production calling convention)
from ._score import MutationRow, MutationScore, format_mutation_table, mutation_score, score_entries
from . import _token_samplers
from ._token_samplers import *  # noqa: F403  (the token-sampler catalogue)
from ._tree_verifiers import *  # noqa: F403
from ._trees import (TREE_BUGS, TREE_CONTROLS, TreeCatalogueEntry, control_sglang_fixed, one_hot_rule_on_iid_drafts,
                     sglang_target_only, tree_sglang_threshold_acc, tree_sglang_threshold_single, tree_catalogue,
                     tree_entry, tree_entry_tv, tree_mutation_score)
from ._verifiers import *  # noqa: F403

__all__ = [
    "CONTROLS",
    "CatalogueEntry",
    "GENERATOR_BUGS",
    "MutationRow",
    "MutationScore",
    "TREE_BUGS",
    "TREE_CONTROLS",
    "TreeCatalogueEntry",
    "VERIFIER_BUGS",
    "catalogue",
    "control_sglang_fixed",
    "entry",
    "format_mutation_table",
    "mutation_score",
    "one_hot_rule_on_iid_drafts",
    "score_entries",
    "sglang_target_only",
    "tree_sglang_threshold_acc",
    "tree_sglang_threshold_single",
    "tree_catalogue",
    "tree_entry",
    "tree_entry_tv",
    "tree_mutation_score",
    "TOKEN_BUGS",
    "TOKEN_CONTROLS",
    "TokenEntry",
    "token_catalogue",
    "token_mutation_score",
] + sorted(_controls.__all__ + _decode_loops.__all__ + _rules.__all__ + _tree_verifiers.__all__ + _verifiers.__all__
           + _ragged.__all__ + _token_samplers.__all__)
