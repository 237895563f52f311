"""Helpers of the scale-out tests, under a name no other test directory uses (a bare ``conftest``
import resolves to whichever conftest.py the session imported last)."""


def without_timings(value):
    """A report's JSON with its timings dropped (``elapsed_s`` of the run and of each scenario): what must be
    equal across executors."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k != "elapsed_s"}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value
