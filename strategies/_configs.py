"""Speculation settings: drafted tokens per step and rows per verifier call."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from ._validation import check_int, order_check

__all__ = ["SpecConfig", "spec_configs"]


@dataclass(frozen=True)
class SpecConfig:
    """``gamma`` drafted tokens per step and ``rows_per_call`` independent rows per verifier call."""

    gamma: int
    rows_per_call: int


def spec_configs(
    *, min_gamma: int = 0, max_gamma: int = 4, min_rows: int = 1, max_rows: int = 8
) -> st.SearchStrategy[SpecConfig]:
    """:class:`SpecConfig` values with ``gamma`` in ``[min_gamma, max_gamma]`` and ``rows_per_call`` in ``[min_rows, max_rows]``.

    * ``min_gamma`` is at least 0 (``gamma = 0`` is plain sampling from the target).
    * ``min_rows`` is at least 1.

    Examples shrink towards ``SpecConfig(gamma=min_gamma, rows_per_call=min_rows)``.
    """
    for name, value in (("min_gamma", min_gamma), ("max_gamma", max_gamma)):
        check_int(value, name, floor=0)
    for name, value in (("min_rows", min_rows), ("max_rows", max_rows)):
        check_int(value, name, floor=1)
    order_check("gamma", 0, min_gamma, max_gamma)
    order_check("rows", 1, min_rows, max_rows)
    return st.builds(SpecConfig, gamma=st.integers(min_gamma, max_gamma), rows_per_call=st.integers(min_rows, max_rows))
