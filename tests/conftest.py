"""Suite-wide Hypothesis settings: our own property tests are deterministic.

``derandomize=True`` draws the same examples on every run (a failure found once is found again, and
no run of the suite differs from the last by luck); ``database=None`` keeps nothing between runs;
``deadline=None`` because a loaded 2-core machine makes per-example wall time meaningless.
"""

from hypothesis import settings

settings.register_profile("specdec-check-suite", derandomize=True, database=None, deadline=None)
settings.load_profile("specdec-check-suite")
