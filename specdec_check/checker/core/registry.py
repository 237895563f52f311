"""The sampler kinds by name: what the command line and the pytest plugin run a name as."""

from __future__ import annotations

__all__ = ["kind_for"]


def kind_for(name: str, *, drafting: str | None = None, processing=None):
    """The :class:`~specdec_check.checker.core.kind.Kind` named ``name`` (a key of
    :data:`specdec_check._settings.KINDS`): the tree kind for ``drafting`` (default: the last scheme, top-k), the
    ragged kind for ``processing`` (default: vLLM v1's), the token-sampler kind for a TokenProcessing (default:
    its defaults)."""
    if name == "verifier":
        from ..chain.kind import VERIFIER

        return VERIFIER
    if name == "generator":
        from ..generator.kind import GENERATOR

        return GENERATOR
    if name == "tree_verifier":
        from ..tree.kind import TREE_VERIFIER, tree_verifier_kind

        return TREE_VERIFIER if drafting is None else tree_verifier_kind(drafting)
    if name == "ragged_verifier":
        from ..ragged.kind import ragged_kind

        return ragged_kind() if processing is None else ragged_kind(processing)
    if name == "token_sampler":
        from ..token.kind import token_kind

        return token_kind(processing)
    raise ValueError(f"unknown sampler kind {name!r}; choose one of verifier, generator, tree_verifier, "
                     "ragged_verifier, token_sampler.")
