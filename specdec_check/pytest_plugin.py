"""pytest plugin for specdec-check (``pytest11`` entry point ``specdec_check``): hooks only.

Selects the sampler the installed property suite checks and hands it to tests
through session-scoped fixtures::

    pytest --pyargs specdec_check.suite --specdec-verifier mypkg.kernels:verify

Precedence for every setting: command-line option > environment variable > ini
option > default (the bundled references). The report header says what is tested
and where each choice came from.

This module is loaded by *every* pytest run in an environment where specdec-check is
installed, so it costs nothing there: it imports only the standard library, pytest and
the settings table. The run's state lives in a :class:`~specdec_check.suite._session.SuiteSession`
in ``config.stash``; Hypothesis profiles, numpy and the checker load only when a specdec
option, fixture or the suite is used. The suite's API (``parametrize_with_checks``) lives in
:mod:`specdec_check.suite`.
"""

from __future__ import annotations

import os

import pytest

from ._options import plugin_options
from ._settings import BACKENDS, DEFAULT_ALPHA, DEFAULT_BACKEND, KINDS, RULES, CallableNotFound, default_sampler

__all__: list = []  # hooks and fixtures only; the suite's API is in specdec_check.suite

_STATE_KEY = pytest.StashKey["SuiteSession"]()
_MARKER = "specdec_statistical"  # the same string as specdec_check.suite._session.STATISTICAL_MARKER
_LEDGER_OUTPUT = "specdec_ledger"  # a pytest-xdist worker's spending, in config.workeroutput

def _text_default(value):
    """An option's default as an environment variable or ini file spells it (None: unset)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# name -> (option, env var, ini key, default), from the option table; sampler defaults depend on the backend.
_SETTINGS = {
    **{kind: (names.option, names.env, names.ini, None) for kind, names in KINDS.items()},
    **{o.name: (o.plugin, o.env, o.ini, _text_default(o.default)) for o in plugin_options()},
}
#: Spellings of a true/false setting in the environment and ini files.
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


# --------------------------------------------------------------------------- options

def pytest_addoption(parser):
    group = parser.getgroup("specdec-check", "specdec-check: the sampler under test")
    for kind in KINDS:
        option, env, ini, _ = _SETTINGS[kind]
        group.addoption(option, metavar="MODULE:CALLABLE", default=None,
                        help=f"{'decode loop' if kind == 'generator' else kind.replace('_', ' ')} to check "
                             f"(env {env}, ini {ini}; "
                             f"default {default_sampler(kind)}).")
    for option in plugin_options():
        default = "" if option.default in (None, False) else f"; default {_text_default(option.default)}"
        group.addoption(option.plugin, default=None, help=f"{option.help} (env {option.env}{default}).",
                        **option.plugin_kwargs)
    for name, (_, env, ini, _) in _SETTINGS.items():
        parser.addini(ini, f"specdec-check {name} (overridden by env {env} and the command-line option)",
                      default=None)


def _resolve_setting(config, name: str, backend: str):
    from .suite._session import Selection

    option, env, ini, default = _SETTINGS[name]
    value = config.getoption(option)
    if value not in (None, ""):
        return Selection(name, str(value), f"option {option}")
    value = os.environ.get(env)
    if value not in (None, ""):
        return Selection(name, value, f"env {env}")
    value = config.getini(ini)
    if value not in (None, "", []):
        return Selection(name, str(value).strip(), f"ini {ini}")
    if name in KINDS:
        return Selection(name, default_sampler(name, backend), "default")
    return Selection(name, default, "default")


# --------------------------------------------------------------------------- configure

@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    from .suite._session import SuiteSession

    config.addinivalue_line(
        "markers", f"{_MARKER}: a specdec-check property that spends false-alarm budget per example")
    backend = _resolve_setting(config, "backend", DEFAULT_BACKEND)
    if backend.value not in BACKENDS:
        raise pytest.UsageError(f"specdec-check: unknown backend {backend.value!r} (from {backend.source}); "
                                f"use {' or '.join(BACKENDS)}.")
    selections = {"backend": backend}
    for name in (*KINDS, *(o.name for o in plugin_options() if o.name != "backend")):
        selections[name] = _resolve_setting(config, name, backend.value)
    if selections["rule"].value not in RULES:
        raise pytest.UsageError(f"specdec-check: rule {selections['rule'].value!r} (from {selections['rule'].source}) "
                                f"must be one of {', '.join(RULES)}.")
    for flag in ("strict", "degenerate"):
        sel = selections[flag]
        if str(sel.value).strip().lower() not in _TRUE + _FALSE:
            raise pytest.UsageError(f"specdec-check: {flag} {sel.value!r} (from {sel.source}) must be true or false.")
    alpha_sel = selections["alpha"]
    try:
        alpha = float(alpha_sel.value)
    except (TypeError, ValueError):
        alpha = -1.0
    if not 0.0 < alpha < 1.0:
        raise pytest.UsageError(
            f"specdec-check: alpha {alpha_sel.value!r} (from {alpha_sel.source}) must be a number in (0, 1), e.g. 1e-6.")
    for name, allowed in (("device", ("cpu",)), ("dtype", ("float64",))):
        sel = selections[name]
        if sel.value is not None and backend.value == "numpy" and sel.value not in allowed:
            raise pytest.UsageError(
                f"specdec-check: {name} {sel.value!r} (from {sel.source}) needs --specdec-backend torch; the numpy "
                "backend runs float64 on the CPU.")
    session = SuiteSession(selections, alpha, explicit_profile=config.getoption("hypothesis_profile", None))
    # Explicit choices are imported now, so a bad path is a usage error before anything runs.
    for kind in KINDS:
        if not selections[kind].is_default:
            _sampler(session, kind)
    config.stash[_STATE_KEY] = session


def _sampler(session, kind: str):
    try:
        return session.sampler(kind)
    except CallableNotFound as exc:
        raise pytest.UsageError(f"specdec-check: {exc}") from None


def _session(config):
    session = config.stash.get(_STATE_KEY, None)
    if session is None:  # pragma: no cover - pytest_configure always runs first
        raise RuntimeError("the specdec-check plugin is not configured")
    return session


# --------------------------------------------------------------------------- header and ledger

def _xdist_workers(config) -> int:
    """How many pytest-xdist workers this process hands tests to: 0 on a worker or when not distributing."""
    if hasattr(config, "workerinput") or getattr(config.option, "dist", "no") == "no":
        return 0
    return len(getattr(config.option, "tx", None) or ())


def pytest_report_header(config):
    session = config.stash.get(_STATE_KEY, None)
    if session is None:
        return None
    workers = _xdist_workers(config)
    return session.header() + ([session.xdist_header(workers)] if workers else [])


@pytest.hookimpl(trylast=True)  # after -k / -m deselection
def pytest_collection_modifyitems(session, config, items):
    state = config.stash.get(_STATE_KEY, None)
    if state is None:
        return
    _only_the_kinds_given(state, config, items)
    statistical = [item for item in items if item.get_closest_marker(_MARKER) is not None]
    if not statistical:
        state.plan = {}
        return
    default = state.examples()
    state.plan = {item.nodeid: int(item.get_closest_marker(_MARKER).kwargs.get("examples", default))
                  for item in statistical}


def given_kinds(state) -> tuple:
    """The kinds whose sampler was chosen (option, environment or ini file); empty when none was."""
    return tuple(kind for kind in KINDS if not state.selections[kind].is_default)


def _only_the_kinds_given(state, config, items) -> None:
    """With a sampler given for some kinds, the bundled property suite runs only theirs: the others would
    check the bundled references (minutes of work that says nothing about the user's code). Each bundled
    suite test asks for its kind's ``specdec_<kind>`` fixture; the user's own tests are never deselected."""
    given = given_kinds(state)
    if not given:
        return
    suite = os.path.dirname(os.path.abspath(__file__)) + os.sep + "suite" + os.sep
    others = {f"specdec_{kind}" for kind in KINDS if kind not in given}
    keep, drop = [], []
    for item in items:
        bundled = str(getattr(item, "path", getattr(item, "fspath", ""))).startswith(suite)
        (drop if bundled and others & set(getattr(item, "fixturenames", ())) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_collectionfinish(config, start_path, items):
    state = config.stash.get(_STATE_KEY, None)
    if state is None or not state.plan:
        return None
    planned = sum(state.plan.values())
    return [
        f"specdec-check: false-alarm budget alpha={state.alpha:g} over {planned} statistical examples in "
        f"{len(state.plan)} tests: alpha={state.alpha / planned:.3g} per example (Bonferroni); "
        f"the suite profile is {state.profile()[1]}. Examples rerun after a failure (shrinking) reuse it "
        "and spend nothing: the run has already failed.",
    ]


def pytest_runtest_call(item):
    state = item.config.stash.get(_STATE_KEY, None)
    if state is not None:
        state.current = item.nodeid


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed property of the suite (``PropertyFailure``) is reported by its message alone: the findings in
    the CLI's words, the example and one repro line, one screen of text with no traceback of the suite's code."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.excinfo is not None and call.excinfo.typename == "PropertyFailure":
        report.longrepr = str(call.excinfo.value)


def pytest_sessionfinish(session):
    state = session.config.stash.get(_STATE_KEY, None)
    if state is not None and state.ledger_started and hasattr(session.config, "workerinput"):
        session.config.workeroutput[_LEDGER_OUTPUT] = state.ledger_summary()  # to the xdist controller


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: the controller hears each worker's spending
def pytest_testnodedown(node, error):
    state = node.config.stash.get(_STATE_KEY, None)
    spent = getattr(node, "workeroutput", {}).get(_LEDGER_OUTPUT)
    if state is not None and spent:
        state.worker_ledgers.append(spent)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = config.stash.get(_STATE_KEY, None)
    if state is not None and state.worker_ledgers:
        terminalreporter.write_line(state.xdist_summary())
        return
    if state is None or not state.ledger_started:
        return
    led = state.ledger().ledger
    terminalreporter.write_line(
        f"specdec-check: spent alpha {led.spent:.3g} of {led.total:g} on {led.checks_spent} statistical examples "
        f"({led.per_check:.3g} each)")


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def specdec_session(pytestconfig):
    """The run's :class:`~specdec_check.suite._session.SuiteSession`: selections, ledger, Hypothesis settings."""
    return _session(pytestconfig)


@pytest.fixture(scope="session")
def specdec_selection(specdec_session) -> dict:
    """``{name: Selection}`` for verifier, generator, backend, device, dtype and alpha."""
    return dict(specdec_session.selections)


@pytest.fixture(scope="session")
def specdec_verifier(specdec_session):
    """The verifier under test. Override this fixture in your conftest.py to check an object you build."""
    return _sampler(specdec_session, "verifier")


@pytest.fixture(scope="session")
def specdec_generator(specdec_session):
    """The decode loop under test. Override this fixture in your conftest.py to check an object you build."""
    return _sampler(specdec_session, "generator")


@pytest.fixture(scope="session")
def specdec_ragged_verifier(specdec_session):
    """The ragged verifier under test (production calling convention). Override it in your conftest.py."""
    return _sampler(specdec_session, "ragged_verifier")


@pytest.fixture(scope="session")
def specdec_token_sampler(specdec_session):
    """The token sampler under test (temperature / top-k / top-p / min-p kernel). Override it in your conftest.py."""
    return _sampler(specdec_session, "token_sampler")


@pytest.fixture(scope="session")
def specdec_tree_verifier(specdec_session):
    """The tree verifier under test (its scheme from its ``drafting`` attribute). Override in conftest.py."""
    return _sampler(specdec_session, "tree_verifier")


@pytest.fixture(scope="session")
def specdec_checker_options(specdec_session) -> dict:
    """``{"backend", "device", "dtype"}`` for check_verifier / check_generator."""
    return specdec_session.options()


@pytest.fixture(scope="session")
def specdec_ledger(specdec_session):
    """The run's false-alarm ledger; ``specdec_ledger.alpha()`` per statistical example."""
    return specdec_session.ledger()


# --------------------------------------------------------------------------- the suite's API, by its old address

def __getattr__(name):
    # ``from specdec_check.pytest_plugin import parametrize_with_checks`` keeps working; the API lives
    # in specdec_check.suite (importing it here at module level would load Hypothesis in every run).
    if name in ("parametrize_with_checks", "SuiteLedger", "Selection", "PROFILES",
                "DEFAULT_EXAMPLE_ALPHA"):
        from . import suite

        return getattr(suite, name)
    if name == "DEFAULT_ALPHA":
        return DEFAULT_ALPHA
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
