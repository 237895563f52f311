import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("_specdec_report_sample", Path(__file__).with_name("_sample.py"))
sample = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sample)


@pytest.fixture
def failed_report():
    return sample.sample_report(passed=False)


@pytest.fixture
def passed_report():
    return sample.sample_report(passed=True, sampler="specdec_check.samplers:numpy_verify")


@pytest.fixture
def evil():
    return sample.EVIL
