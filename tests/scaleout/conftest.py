import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # scaleout_samplers and scaleout_helpers, importable by name here and in every worker
    sys.path.insert(0, str(HERE))


@pytest.fixture
def cli(tmp_path):
    """Run ``python -m specdec_check ARGS`` in a subprocess in ``tmp_path`` (scaleout_samplers on its path)."""

    def run(*args, timeout=300, env=None):
        environ = dict(os.environ, **(env or {}))
        environ["PYTHONPATH"] = os.pathsep.join([str(HERE), environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        environ.pop("COLUMNS", None)
        return subprocess.run([sys.executable, "-m", "specdec_check", *map(str, args)], cwd=tmp_path, env=environ,
                              capture_output=True, text=True, timeout=timeout)

    return run


@pytest.fixture(scope="module")
def dask_executor():
    """A Dask ``LocalCluster`` of two single-threaded in-process workers, started here; its client's executor."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        yield client.get_executor()
