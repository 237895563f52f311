"""Checks every verifier kind shares: the check protocol, the probes (NaN rows, zero coins), determinism
and the collision test, and the rule-agnostic completed-law test.

A kind's own checks (its law tests, its independence and efficiency tests) live in its folder
(``checker/chain``, ``checker/tree``, ``checker/ragged``, ``checker/generator``) and follow the
same protocol (:class:`~specdec_check.checker.checks.base.Check`).
"""

from .base import Check, Classify

__all__ = ["Check", "Classify"]
