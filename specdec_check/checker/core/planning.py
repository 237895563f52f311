"""Planning a scenario's law tests: the samples a test needs, and the resolution it reached."""

from __future__ import annotations

from ... import stats
from . import plan_cache

__all__ = ["achieved_resolution", "known_plans", "planned_samples", "remember_plans"]

#: ``(design TV, support, alpha) -> samples``: the plans made in this process. A battery plans a few distinct
#: triples, each a pure function of its arguments that costs up to a second or two (a token scenario's at TV
#: 1e-3), so the driver's plans travel with the shards (:func:`known_plans`) and a worker does not redo them.
_PLANS: dict = {}


def planned_samples(design_tv: float, support_size: int, alpha: float) -> int:
    """:func:`specdec_check.stats.samples_for` for a uniform law, memoised in this process and on disk
    (:mod:`.plan_cache`): every scenario of a battery plans with the same arguments, and the plan is a pure
    function of them."""
    key = (float(design_tv), int(support_size), float(alpha))
    hit = _PLANS.get(key)
    if hit is None:
        hit = plan_cache.load(key)  # kept on disk by an earlier run (:mod:`.plan_cache`)
        if hit is None:
            hit = int(stats.samples_for(design_tv, support_size=support_size, alpha=alpha))
            plan_cache.store(key, hit)
        _PLANS[key] = hit
    return hit


def known_plans() -> tuple:
    """The plans made in this process, as ``((design TV, support, alpha), samples)`` pairs (picklable)."""
    return tuple(_PLANS.items())


def remember_plans(plans) -> None:
    """Take plans made elsewhere (:func:`known_plans` of the driver): the same function of the same arguments."""
    _PLANS.update(plans)


def achieved_resolution(records) -> float | None:
    """The smallest TV a scenario's law tests could detect with power 0.99, as achieved: the best
    ``min_detectable_tv`` among its records (law tests only carry one); None without law tests."""
    values = [r.min_detectable_tv for r in records if r.min_detectable_tv is not None and r.n > 0]
    return min(values) if values else None
