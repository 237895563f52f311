"""Planning a scenario's law tests: the samples a test needs, and the resolution it reached."""

from __future__ import annotations

import functools

from ... import stats

__all__ = ["achieved_resolution", "planned_samples"]


@functools.lru_cache(maxsize=256)  # a battery plans a few distinct (TV, support, alpha) triples
def planned_samples(design_tv: float, support_size: int, alpha: float) -> int:
    """:func:`specdec_check.stats.samples_for` for a uniform law, memoised: every scenario of a
    battery plans with the same arguments, and the plan is a pure function of them."""
    return int(stats.samples_for(design_tv, support_size=support_size, alpha=alpha))


def achieved_resolution(records) -> float | None:
    """The smallest TV a scenario's law tests could detect with power 0.99, as achieved: the best
    ``min_detectable_tv`` among its records (law tests only carry one); None without law tests."""
    values = [r.min_detectable_tv for r in records if r.min_detectable_tv is not None and r.n > 0]
    return min(values) if values else None
