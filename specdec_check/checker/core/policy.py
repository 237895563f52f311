"""The one policy table: what each kind of finding means, declared once for every sampler kind.

A check never picks a finding's class itself; it names the *case* it saw and the recorder
(:class:`~specdec_check.checker.core.recorder.Recorder`) looks the class up here. So a NaN row,
a degenerate shape or an exactly-zero coin is the same class in the chain, tree and ragged kinds,
and ``strict=True`` turns every robustness or edge-case warning into a failure in all of them.

- ``failure``: the output law is wrong, or the contract is broken (fails the run).
- ``robustness`` (a warning; a failure under ``strict``): what a sampler does outside the
  contract's main domain: a row of NaN or infinite inputs, a degenerate shape (gamma = 0, V = 1,
  a tree without nodes). A robustness policy is reported, never confused with exactness.
- ``edge case`` (a warning; a failure under ``strict``): an event of positive but tiny probability
  on valid inputs, stated with its rate: every coin exactly 0. A float32 ``torch.rand`` returns
  exactly 0 with probability 2^-24 per draw (SGLang #35771 saw it in production), a float64
  uniform with probability 2^-53 (53-bit mantissa: numpy's ``Generator.random``, torch float64).
  An edge-case finding never stops a scenario: its law tests still run.
- ``inefficiency``: lossless as far as the law tests see, but accepting less than the rule allows.
- ``information`` (kind ``"nonstandard"``): a lossless rule other than the reference, or one that
  accepts more than the reference ("a better rule", said only of a rule whose law tests passed).
- ``inconclusive`` is not a finding: it is the verdict of a run whose law tests did not reach the
  mode's design TV (:func:`specdec_check.checker.core.session.evidence_gaps`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CASES", "Case", "finding_kind", "zero_coin_rate"]


@dataclass(frozen=True)
class Case:
    """One case a check can report: its finding kind, its kind under ``strict``, and what it means."""

    name: str
    kind: str
    strict_kind: str
    meaning: str


CASES = {case.name: case for case in (
    Case("failure", "failure", "failure", "the output law is wrong, or the contract is broken"),
    Case("robustness", "warning", "failure",
         "robustness, not exactness: a row of NaN or infinite inputs, or a shape outside the contract's main domain"),
    Case("edge_case", "warning", "failure",
         "an edge case of positive but tiny probability on valid inputs (its rate is stated); the law tests still run"),
    Case("inefficiency", "inefficiency", "inefficiency", "lossless as far as the law tests see, but slower"),
    Case("information", "nonstandard", "nonstandard",
         "information: another lossless rule than the reference, or one that accepts more"),
)}


def finding_kind(case: str, *, strict: bool) -> str:
    """The finding kind (:data:`specdec_check._report_rules.FINDING_KINDS`) of ``case`` under ``strict``."""
    try:
        entry = CASES[case]
    except KeyError:
        raise ValueError(f"unknown finding case {case!r}; the policy table knows {tuple(CASES)}.") from None
    return entry.strict_kind if strict else entry.kind


#: Mantissa bits of a uniform draw by the dtype it is drawn in: a uniform on the grid k / 2^bits is
#: exactly 0 with probability 2^-bits (float32 ``torch.rand``: 24; float64, numpy's ``random``: 53).
UNIFORM_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def zero_coin_rate(dtype: str) -> str:
    """How often a coin drawn in ``dtype`` is exactly 0, as text (``"2^-24 (about 6.0e-08) per float32 draw"``);
    for a wider dtype the float32 rate follows, since a sampler may draw its own coins in float32 (``torch.rand``
    on a device) whatever the dtype of the laws it is given."""
    name = str(dtype).replace("torch.", "")
    bits = UNIFORM_BITS.get(name, 53)
    rate = f"2^-{bits} (about {2.0 ** -bits:.1e}) per {name} draw"
    float32 = UNIFORM_BITS["float32"]
    if bits > float32:
        rate += f", 2^-{float32} (about {2.0 ** -float32:.1e}) per float32 draw"
    return rate
