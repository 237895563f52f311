"""A bracketed root of a scalar function, without importing ``scipy.optimize`` (about 0.1 s of CPU and 22 MB of
resident memory, for the one root the power planner solves; issue 31).

:func:`brent_root` is Brent's method (Brent 1973, *Algorithms for Minimization without Derivatives*, ch. 4) in
the form of ``scipy.optimize.brentq`` (C. Harris's ``brentq.c``): inverse quadratic or secant steps while they
shrink the bracket fast enough, bisection otherwise. Its floating-point operations are those of
``scipy.optimize.brentq`` in the same order, so it returns the same float on the same function (a different
root within the tolerance would move the planner's detectable TVs, and so the reports, in their last digits):
``tests/stats/test_roots.py`` compares the two on many functions, the planner's own among them.
"""

from __future__ import annotations

import math

__all__ = ["brent_root"]

#: The iteration limit of ``scipy.optimize.brentq`` (its default ``maxiter``).
MAX_ITERATIONS = 100


def _sign(value: float) -> bool:
    return math.copysign(1.0, value) < 0.0


def brent_root(f, lo: float, hi: float, *, xtol: float, rtol: float, maxiter: int = MAX_ITERATIONS) -> float:
    """A root of ``f`` in ``[lo, hi]`` to within ``xtol + rtol |root|`` (Brent 1973, ch. 4).

    ``f(lo)`` and ``f(hi)`` must have opposite signs (or one be zero). Raises ValueError when they do not, or when
    ``f`` returns NaN, and RuntimeError when ``maxiter`` steps do not converge (as ``scipy.optimize.brentq``).
    """
    if not xtol > 0:
        raise ValueError(f"xtol must be positive; got {xtol!r}.")
    if not rtol > 0:
        raise ValueError(f"rtol must be positive; got {rtol!r}.")

    def value(x):
        y = float(f(x))
        if math.isnan(y):
            raise ValueError(f"the function returned NaN at x = {x!r}: no root can be bracketed.")
        return y

    x_prev, x_cur = float(lo), float(hi)
    f_prev, f_cur = value(x_prev), value(x_cur)
    if f_prev == 0.0:
        return x_prev
    if f_cur == 0.0:
        return x_cur
    if _sign(f_prev) == _sign(f_cur):
        raise ValueError(f"f({lo!r}) = {f_prev!r} and f({hi!r}) = {f_cur!r} have the same sign: no root is "
                         "bracketed between them.")
    # x_cur: the best estimate; x_prev: the previous one; x_far: the other end of the bracket (f changes sign
    # between x_cur and x_far); step_prev / step_cur: the last two steps taken.
    x_far = f_far = step_prev = step_cur = 0.0
    for _ in range(maxiter):
        if f_prev != 0.0 and f_cur != 0.0 and _sign(f_prev) != _sign(f_cur):
            x_far, f_far = x_prev, f_prev
            step_prev = step_cur = x_cur - x_prev
        if abs(f_far) < abs(f_cur):  # keep the smaller |f| as the estimate
            x_prev, x_cur, x_far = x_cur, x_far, x_cur
            f_prev, f_cur, f_far = f_cur, f_far, f_cur
        half_tol = (xtol + rtol * abs(x_cur)) / 2
        half_bracket = (x_far - x_cur) / 2
        if f_cur == 0.0 or abs(half_bracket) < half_tol:
            return x_cur
        if abs(step_prev) > half_tol and abs(f_cur) < abs(f_prev):
            if x_prev == x_far:  # two points: the secant step
                trial = -f_cur * (x_cur - x_prev) / (f_cur - f_prev)
            else:  # three points: inverse quadratic interpolation
                slope_prev = (f_prev - f_cur) / (x_prev - x_cur)
                slope_far = (f_far - f_cur) / (x_far - x_cur)
                trial = -f_cur * (f_far * slope_far - f_prev * slope_prev) / (slope_far * slope_prev * (f_far - f_prev))
            limit = 3 * abs(half_bracket) - half_tol
            if abs(step_prev) < limit:  # the smaller of the two, the second when equal (as brentq.c's MIN)
                limit = abs(step_prev)
            if 2 * abs(trial) < limit:
                step_prev, step_cur = step_cur, trial  # an interpolation step that shrinks fast enough
            else:
                step_prev = step_cur = half_bracket
        else:
            step_prev = step_cur = half_bracket
        x_prev, f_prev = x_cur, f_cur
        x_cur += step_cur if abs(step_cur) > half_tol else (half_tol if half_bracket > 0 else -half_tol)
        f_cur = value(x_cur)
    raise RuntimeError(f"no convergence in {maxiter} iterations (last estimate {x_cur!r}).")
