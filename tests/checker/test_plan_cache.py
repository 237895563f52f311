"""Sample-size plans kept on disk (checker.core.plan_cache): the same numbers as computing them, read back by a
later process, ignored when damaged or made by another planner, and not written when the cache is off."""
import json

import pytest

from specdec_check.checker.core import plan_cache, planning
from specdec_check import stats

KEY = (0.3, 3, 0.01)  # a plan that costs milliseconds


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv(plan_cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(planning, "_PLANS", {})
    return tmp_path / plan_cache.FILE_NAME


def _no_planner(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("planned again: the kept plan was not used")

    monkeypatch.setattr(stats, "samples_for", refuse)


def test_a_plan_is_kept_and_read_back_by_a_later_process(fresh, monkeypatch):
    computed = planning.planned_samples(*KEY)
    assert computed == stats.samples_for(KEY[0], support_size=KEY[1], alpha=KEY[2])
    assert json.loads(fresh.read_text())["plans"] == {"0.3 3 0.01": computed}
    monkeypatch.setattr(planning, "_PLANS", {})  # a new process: nothing in memory
    _no_planner(monkeypatch)
    assert planning.planned_samples(*KEY) == computed


@pytest.mark.parametrize("content", ["{not json", json.dumps({"planner": "another planner", "plans": {"0.3 3 0.01": 7}}),
                                     json.dumps({"planner": None, "plans": [1]})], ids=["damaged", "other", "malformed"])
def test_a_damaged_file_or_another_planners_is_ignored_and_replaced(fresh, content):
    fresh.write_text(content)
    computed = planning.planned_samples(*KEY)
    assert computed == stats.samples_for(KEY[0], support_size=KEY[1], alpha=KEY[2]) != 7
    data = json.loads(fresh.read_text())
    assert data["planner"] == plan_cache.planner_key() and data["plans"] == {"0.3 3 0.01": computed}


def test_the_planner_key_changes_with_the_planners_source(monkeypatch, tmp_path):
    from pathlib import Path

    key = plan_cache.planner_key()
    copy = tmp_path / "stats"
    copy.mkdir()
    folder = Path(stats.__file__).parent
    for name in plan_cache.PLANNER_SOURCES:
        (copy / name).write_bytes((folder / name).read_bytes())
    (copy / "_power.py").write_bytes((folder / "_power.py").read_bytes() + b"\n# changed\n")
    monkeypatch.setattr(stats, "__file__", str(copy / "__init__.py"))
    plan_cache.planner_key.cache_clear()
    try:
        assert plan_cache.planner_key() != key
    finally:
        monkeypatch.undo()
        plan_cache.planner_key.cache_clear()
    assert plan_cache.planner_key() == key


def test_off_writes_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv(plan_cache.CACHE_ENV, "off")
    monkeypatch.setattr(planning, "_PLANS", {})
    assert plan_cache.cache_file() is None
    planning.planned_samples(*KEY)
    assert not list(tmp_path.iterdir())


def test_an_unwritable_folder_only_costs_the_cache(monkeypatch, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the folder should be")
    monkeypatch.setenv(plan_cache.CACHE_ENV, str(blocked / "sub"))
    monkeypatch.setattr(planning, "_PLANS", {})
    assert planning.planned_samples(*KEY) == stats.samples_for(KEY[0], support_size=KEY[1], alpha=KEY[2])
