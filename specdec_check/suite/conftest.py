"""Configuration of the installed suite (collected by ``pytest --pyargs specdec_check.suite``).

The fixtures (``specdec_verifier``, ``specdec_generator``, ``specdec_checker_options``,
``specdec_ledger``) and the options come from the ``specdec_check`` pytest plugin,
which pytest loads through its ``pytest11`` entry point. Override
``specdec_verifier`` / ``specdec_generator`` in your own conftest.py to check an
object you build at run time.
"""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _specdec_plugin_loaded(pytestconfig):
    if not pytestconfig.pluginmanager.hasplugin("specdec_check.pytest_plugin") and \
            not pytestconfig.pluginmanager.hasplugin("specdec_check"):
        pytest.fail("the specdec_check pytest plugin is not loaded (plugin autoload disabled?); "
                    "run with -p specdec_check.pytest_plugin", pytrace=False)
