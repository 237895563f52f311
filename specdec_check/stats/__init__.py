"""Statistics engine of specdec-check (self-contained; no knowledge of speculative decoding).

Identity tests of counts against an exactly known law with exact, conservative
calibration at extreme alpha, Poisson-binomial exact tests, randomized PIT for
per-row conditional laws, TV diagnostics and bounds, power planning, an
anytime-valid sequential e-process and a run-level alpha ledger.
"""
from ._identity import IdentityTestResult, identity_pvalues, identity_test, support_violations
from ._ledger import AlphaBudgetExceeded, AlphaLedger
from ._pit import UniformityTestResult, pit_support_violations, pit_test, randomized_pit
from ._poisson_binomial import PoissonBinomialResult, poisson_binomial_pmf, poisson_binomial_test
from ._power import Detectability, detectability, min_detectable_tv, samples_for
from ._sequential import SequentialIdentityTest, SequentialTestResult
from ._tv import expected_null_tv, tv_deviation_radius, tv_distance, tv_plugin_radius, tv_upper_bound

__all__ = sorted([
    "AlphaBudgetExceeded",
    "AlphaLedger",
    "Detectability",
    "IdentityTestResult",
    "PoissonBinomialResult",
    "SequentialIdentityTest",
    "SequentialTestResult",
    "UniformityTestResult",
    "detectability",
    "expected_null_tv",
    "identity_pvalues",
    "identity_test",
    "min_detectable_tv",
    "pit_support_violations",
    "pit_test",
    "poisson_binomial_pmf",
    "poisson_binomial_test",
    "randomized_pit",
    "samples_for",
    "support_violations",
    "tv_deviation_radius",
    "tv_distance",
    "tv_plugin_radius",
    "tv_upper_bound",
])
