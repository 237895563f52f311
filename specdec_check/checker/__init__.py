"""The checker: run a sampler on a scenario battery and report what was proven."""

from ._generator import GENERATOR_CHECKS, check_generator
from ._backend import Backend, NumpyBackend, make_backend
from ._modes import MODES, Mode
from ._report import REPORT_VERSION, CheckReport, Finding, ScenarioSummary, TestRecord
from ._verifier import VERIFIER_CHECKS, check_verifier

__all__ = [
    "GENERATOR_CHECKS",
    "MODES",
    "REPORT_VERSION",
    "VERIFIER_CHECKS",
    "Backend",
    "CheckReport",
    "Finding",
    "Mode",
    "NumpyBackend",
    "ScenarioSummary",
    "TestRecord",
    "check_generator",
    "check_verifier",
    "make_backend",
]
