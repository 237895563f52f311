"""pytest plugin for specdec-check (``pytest11`` entry point ``specdec_check``).

Selects the sampler the installed property suite checks and hands it to tests
through session-scoped fixtures::

    pytest --pyargs specdec_check.suite --specdec-verifier mypkg.kernels:verify

Precedence for every setting: command-line option > environment variable > ini
option > default (the bundled references ``specdec_check.samplers:numpy_verify``
and ``specdec_check.samplers:numpy_generate``). The report header says what is
tested and where each choice came from.

This module is loaded by *every* pytest run in an environment where
specdec-check is installed, so it imports nothing heavy at module level: no
numpy, no torch, no checker. Those load inside hooks and fixtures, when used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_EXAMPLE_ALPHA",
    "PROFILES",
    "Selection",
    "SuiteLedger",
    "parametrize_with_checks",
    "resolve_callable",
    "suite_settings",
]

#: Family-wise false-alarm budget of one suite run (probability that a correct sampler fails any test).
DEFAULT_ALPHA = 1e-6
#: Per-example alpha of a ``parametrize_with_checks`` check called without a ledger.
DEFAULT_EXAMPLE_ALPHA = 1e-9

#: Hypothesis profiles registered by the plugin (name -> settings keywords; ``specdec-ci`` extends ``ci``).
PROFILES = {
    "specdec-quick": {"max_examples": 5},
    "specdec-default": {"max_examples": 50},
    "specdec-ci": {"max_examples": 50},
    "specdec-thorough": {"max_examples": 200},
}

STATISTICAL_MARKER = "specdec_statistical"

# name -> (option, env var, ini key, default)
_SETTINGS = {
    "verifier": ("--specdec-verifier", "SPECDEC_VERIFIER", "specdec_verifier", "specdec_check.samplers:numpy_verify"),
    "generator": ("--specdec-generator", "SPECDEC_GENERATOR", "specdec_generator",
                  "specdec_check.samplers:numpy_generate"),
    "backend": ("--specdec-backend", "SPECDEC_BACKEND", "specdec_backend", "numpy"),
    "device": ("--specdec-device", "SPECDEC_DEVICE", "specdec_device", None),
    "dtype": ("--specdec-dtype", "SPECDEC_DTYPE", "specdec_dtype", None),
    "alpha": ("--specdec-alpha", "SPECDEC_ALPHA", "specdec_alpha", str(DEFAULT_ALPHA)),
}
# Defaults that depend on the backend.
_TORCH_DEFAULTS = {"verifier": "specdec_check.samplers:torch_verify",
                   "generator": "specdec_check.samplers:torch_generate"}

_STATE_KEY = pytest.StashKey["_PluginState"]()
# The suite's Hypothesis settings, chosen in pytest_configure and read by suite modules at import.
_SUITE_PROFILE: dict = {"name": None, "why": "plugin not configured"}


@dataclass(frozen=True)
class Selection:
    """One resolved setting: its value and where it came from (``option --x``, ``env X``, ``ini x``, ``default``)."""

    name: str
    value: str | None
    source: str

    @property
    def is_default(self) -> bool:
        return self.source == "default"


class _PluginState:
    def __init__(self, selections: dict[str, Selection], alpha: float):
        self.selections = selections
        self.alpha = alpha
        self.plan: dict[str, int] = {}  # nodeid -> planned statistical examples
        self.ledger: SuiteLedger | None = None


# --------------------------------------------------------------------------- options

def pytest_addoption(parser):
    group = parser.getgroup("specdec-check", "specdec-check: the sampler under test")
    group.addoption("--specdec-verifier", metavar="MODULE:CALLABLE", default=None,
                    help="verifier to check (env SPECDEC_VERIFIER, ini specdec_verifier; "
                         "default specdec_check.samplers:numpy_verify).")
    group.addoption("--specdec-generator", metavar="MODULE:CALLABLE", default=None,
                    help="decode loop to check (env SPECDEC_GENERATOR, ini specdec_generator; "
                         "default specdec_check.samplers:numpy_generate).")
    group.addoption("--specdec-backend", metavar="NAME", default=None, choices=("numpy", "torch"),
                    help="array backend the sampler uses: numpy (default) or torch (env SPECDEC_BACKEND).")
    group.addoption("--specdec-device", metavar="DEVICE", default=None,
                    help="torch device for the sampler's inputs, e.g. cuda:0 (env SPECDEC_DEVICE).")
    group.addoption("--specdec-dtype", metavar="DTYPE", default=None,
                    help="dtype of the probabilities handed to the sampler, e.g. float32 (env SPECDEC_DTYPE).")
    group.addoption("--specdec-alpha", metavar="ALPHA", default=None,
                    help=f"false-alarm budget of the whole suite run (env SPECDEC_ALPHA; default {DEFAULT_ALPHA:g}).")
    for name, (_, env, ini, default) in _SETTINGS.items():
        parser.addini(ini, f"specdec-check {name} (overridden by env {env} and the command-line option)",
                      default=None)
    # Registered here, before conftest.py files load, so a user's conftest can build on them and
    # --hypothesis-profile=specdec-* works (Hypothesis loads the profile in its pytest_configure).
    _register_profiles()


def _resolve_setting(config, name: str, backend: str | None = None) -> Selection:
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
    if backend == "torch" and name in _TORCH_DEFAULTS:
        return Selection(name, _TORCH_DEFAULTS[name], "default")
    return Selection(name, default, "default")


def resolve_callable(spec: str, *, what: str = "sampler", source: str = "") -> object:
    """Import ``"module:callable"`` (or ``"module.callable"``) and return the callable.

    Raises ``pytest.UsageError`` with a message that says how to fix ``spec`` when the
    module does not import, the attribute does not exist or the object is not callable.
    """
    import importlib
    import pkgutil

    where = f" (from {source})" if source else ""
    hint = f"Give the {what} as MODULE:CALLABLE, e.g. mypkg.kernels:verify."
    if not isinstance(spec, str) or not spec.strip():
        raise pytest.UsageError(f"specdec-check: empty {what} path{where}. {hint}")
    spec = spec.strip()
    module_name = spec.partition(":")[0] if ":" in spec else spec
    try:
        obj = pkgutil.resolve_name(spec)
    except ValueError as exc:
        raise pytest.UsageError(f"specdec-check: {what} {spec!r}{where} is not a valid path ({exc}). {hint}") from None
    except ImportError as exc:
        raise pytest.UsageError(
            f"specdec-check: cannot import the {what} {spec!r}{where}: {type(exc).__name__}: {exc}. "
            f"Check the spelling and that {module_name.split('.')[0]!r} is installed or on sys.path "
            f"(PYTHONPATH). {hint}") from None
    except AttributeError as exc:
        if ":" in spec:
            mod, _, attr = spec.partition(":")
            try:
                available = sorted(n for n in dir(importlib.import_module(mod)) if not n.startswith("_"))
            except Exception:  # pragma: no cover - the module imported a moment ago
                available = []
            shown = ", ".join(available[:12]) + (", ..." if len(available) > 12 else "")
            raise pytest.UsageError(
                f"specdec-check: module {mod!r} has no attribute {attr!r} (the {what} {spec!r}{where}). "
                f"Public names there: {shown or '(none)'}.") from None
        raise pytest.UsageError(f"specdec-check: cannot resolve the {what} {spec!r}{where}: {exc}. {hint}") from None
    except Exception as exc:  # the user's module raised while importing
        raise pytest.UsageError(
            f"specdec-check: importing the {what} {spec!r}{where} raised {type(exc).__name__}: {exc}") from None
    if not callable(obj):
        raise pytest.UsageError(
            f"specdec-check: the {what} {spec!r}{where} is a {type(obj).__name__}, not a callable. "
            f"Point at a function (or an object with __call__). {hint}")
    return obj


# --------------------------------------------------------------------------- configure

@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line(
        "markers", f"{STATISTICAL_MARKER}: a specdec-check property that spends false-alarm budget per example")

    backend = _resolve_setting(config, "backend")
    if backend.value not in ("numpy", "torch"):
        raise pytest.UsageError(
            f"specdec-check: unknown backend {backend.value!r} (from {backend.source}); use numpy or torch.")
    selections = {"backend": backend}
    for name in ("verifier", "generator", "device", "dtype", "alpha"):
        selections[name] = _resolve_setting(config, name, backend.value)
    alpha_sel = selections["alpha"]
    try:
        alpha = float(alpha_sel.value)
    except (TypeError, ValueError):
        alpha = -1.0
    if not 0.0 < alpha < 1.0:
        raise pytest.UsageError(
            f"specdec-check: alpha {alpha_sel.value!r} (from {alpha_sel.source}) must be a number in (0, 1), e.g. 1e-6.")
    for name in ("device", "dtype"):
        sel = selections[name]
        if sel.value is not None and backend.value == "numpy" and sel.value not in {"device": ("cpu",),
                                                                                   "dtype": ("float64",)}[name]:
            raise pytest.UsageError(
                f"specdec-check: {name} {sel.value!r} (from {sel.source}) needs --specdec-backend torch; the numpy "
                "backend runs float64 on the CPU.")
    # Explicit choices are imported now, so a bad path is a usage error before anything runs.
    for name in ("verifier", "generator"):
        sel = selections[name]
        if not sel.is_default:
            resolve_callable(sel.value, what=name, source=sel.source)
    config.stash[_STATE_KEY] = _PluginState(selections, alpha)


def _register_profiles() -> None:
    from hypothesis import HealthCheck, settings

    common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
    for name, kwargs in PROFILES.items():
        if name == "specdec-ci":
            settings.register_profile(name, settings.get_profile("ci"), **kwargs)
        else:
            settings.register_profile(name, **common, **kwargs)


def _choose_suite_profile(config) -> None:
    """Pick the Hypothesis settings for the suite; never override a profile the user chose."""
    from hypothesis import settings

    current = settings.get_current_profile_name()
    explicit = config.getoption("hypothesis_profile", None)
    base = current.split("-with-")[0]
    if explicit or base not in ("default", "ci"):
        _SUITE_PROFILE.update(name=None, why=f"{current!r}, chosen by the user")
    elif base == "ci":
        _SUITE_PROFILE.update(name="specdec-ci", why="specdec-ci (Hypothesis' 'ci' profile is active: CI is set)")
    else:
        _SUITE_PROFILE.update(name="specdec-default", why="specdec-default (no profile chosen)")


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    _choose_suite_profile(session.config)


def suite_settings(**overrides):
    """The Hypothesis ``settings`` decorator for suite properties (or ``parametrize_with_checks`` checks).

    The user's profile when they chose one (``--hypothesis-profile`` or a profile loaded
    in conftest.py), else ``specdec-ci`` under CI or ``specdec-default``. Verbosity and
    phases always follow the active profile.
    """
    from hypothesis import settings

    name = _SUITE_PROFILE["name"]
    if name is None:
        return settings(**overrides) if overrides else settings()
    current = settings()
    return settings(settings.get_profile(name), verbosity=current.verbosity, phases=current.phases, **overrides)


# --------------------------------------------------------------------------- header

def pytest_report_header(config):
    state = config.stash.get(_STATE_KEY, None)
    if state is None:
        return None
    sel = state.selections
    lines = [
        f"specdec-check: verifier {sel['verifier'].value} ({sel['verifier'].source}); "
        f"generator {sel['generator'].value} ({sel['generator'].source})",
        f"specdec-check: backend {sel['backend'].value} ({sel['backend'].source}), "
        f"device {sel['device'].value or 'default'} ({sel['device'].source}), "
        f"dtype {sel['dtype'].value or 'default'} ({sel['dtype'].source}); "
        f"false-alarm budget alpha={state.alpha:g} per run ({sel['alpha'].source})",
    ]
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("SPECDEC")}
    if env:  # shown to catch typos, as array-api-tests does
        lines.append("specdec-check: env " + " ".join(f"{k}={v}" for k, v in env.items()))
    return lines


# --------------------------------------------------------------------------- ledger

def _planned_examples(item) -> int:
    from hypothesis import settings

    inner = getattr(item, "obj", None)
    own = getattr(inner, "_hypothesis_internal_use_settings", None)
    marker = item.get_closest_marker(STATISTICAL_MARKER)
    if marker is not None and "examples" in marker.kwargs:
        return int(marker.kwargs["examples"])
    return int((own or settings.default).max_examples)


@pytest.hookimpl(trylast=True)  # after -k / -m deselection
def pytest_collection_modifyitems(session, config, items):
    state = config.stash.get(_STATE_KEY, None)
    if state is None:
        return
    state.plan = {item.nodeid: _planned_examples(item) for item in items
                  if item.get_closest_marker(STATISTICAL_MARKER) is not None}
    state.ledger = None


def pytest_report_collectionfinish(config, start_path, items):
    state = config.stash.get(_STATE_KEY, None)
    if state is None or not state.plan:
        return None
    planned = sum(state.plan.values())
    return [
        f"specdec-check: false-alarm budget alpha={state.alpha:g} over {planned} statistical examples in "
        f"{len(state.plan)} tests: alpha={state.alpha / planned:.3g} per example (Bonferroni); "
        f"the suite profile is {_SUITE_PROFILE['why']}. Examples rerun after a failure (shrinking) reuse it "
        "and spend nothing: the run has already failed.",
    ]


class SuiteLedger:
    """Hands each statistical example its alpha: ``total / planned`` from an :class:`~specdec_check.stats.AlphaLedger`.

    The first ``plan[nodeid]`` examples of a test spend from the ledger; later calls
    of that test (Hypothesis shrinking or replaying a failure) get the same alpha
    without spending, because they only happen once the run has failed.
    """

    def __init__(self, total: float, plan: dict[str, int]):
        from specdec_check.stats import AlphaLedger

        self.plan = dict(plan)
        self.ledger = AlphaLedger(total, planned=max(1, sum(self.plan.values())))
        self.calls: dict[str, int] = {}
        self.current: str = "<outside a test>"  # set by the plugin before each test runs

    @property
    def per_example(self) -> float:
        return self.ledger.per_check

    def alpha(self, nodeid: str | None = None) -> float:
        """Alpha for one example of test ``nodeid`` (default: the test now running)."""
        nodeid = self.current if nodeid is None else nodeid
        n = self.calls.get(nodeid, 0)
        self.calls[nodeid] = n + 1
        if n < self.plan.get(nodeid, 0):
            return self.ledger.spend(f"{nodeid}#{n}")
        return self.ledger.per_check

    def __repr__(self):
        return f"SuiteLedger({self.ledger!r})"


# --------------------------------------------------------------------------- fixtures

def _state(config) -> _PluginState:
    state = config.stash.get(_STATE_KEY, None)
    if state is None:  # pragma: no cover - pytest_configure always runs first
        raise RuntimeError("the specdec-check plugin is not configured")
    return state


@pytest.fixture(scope="session")
def specdec_selection(pytestconfig) -> dict:
    """``{name: Selection}`` for verifier, generator, backend, device, dtype and alpha."""
    return dict(_state(pytestconfig).selections)


@pytest.fixture(scope="session")
def specdec_verifier(pytestconfig):
    """The verifier under test. Override this fixture in your conftest.py to check an object you build."""
    sel = _state(pytestconfig).selections["verifier"]
    return resolve_callable(sel.value, what="verifier", source=sel.source)


@pytest.fixture(scope="session")
def specdec_generator(pytestconfig):
    """The decode loop under test. Override this fixture in your conftest.py to check an object you build."""
    sel = _state(pytestconfig).selections["generator"]
    return resolve_callable(sel.value, what="generator", source=sel.source)


@pytest.fixture(scope="session")
def specdec_checker_options(pytestconfig) -> dict:
    """``{"backend", "device", "dtype"}`` for check_verifier / check_generator."""
    sel = _state(pytestconfig).selections
    return {"backend": sel["backend"].value, "device": sel["device"].value, "dtype": sel["dtype"].value}


@pytest.fixture(scope="session")
def specdec_ledger(pytestconfig) -> SuiteLedger:
    """The run's false-alarm ledger; ``specdec_ledger.alpha()`` per statistical example."""
    state = _state(pytestconfig)
    if state.ledger is None:
        state.ledger = SuiteLedger(state.alpha, state.plan)
        state.ledger.current = getattr(state, "current", state.ledger.current)
    return state.ledger


def pytest_runtest_call(item):
    state = item.config.stash.get(_STATE_KEY, None)
    if state is not None:
        state.current = item.nodeid
        if state.ledger is not None:
            state.ledger.current = item.nodeid


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = config.stash.get(_STATE_KEY, None)
    if state is None or state.ledger is None:
        return
    led = state.ledger.ledger
    terminalreporter.write_line(
        f"specdec-check: spent alpha {led.spent:.3g} of {led.total:g} on {led.checks_spent} statistical examples "
        f"({led.per_check:.3g} each)")


# --------------------------------------------------------------------------- parametrize_with_checks

def parametrize_with_checks(*, verifiers=(), generators=(), checks=None):
    """Parametrize a test over the suite's properties for your own samplers (scikit-learn style).

    ::

        from specdec_check.pytest_plugin import parametrize_with_checks

        @parametrize_with_checks(verifiers=[mypkg.kernels.verify])
        def test_my_verifier(check, specdec_ledger):
            check(ledger=specdec_ledger)  # or check() with a fixed per-example alpha

    Ids are ``<sampler>-<property>``, so ``-k first_token`` selects one property.
    ``checks`` restricts the properties by name (see ``specdec_check.suite.VERIFIER_PROPERTIES``
    and ``GENERATOR_PROPERTIES``). Backend, device and dtype come from the plugin's options.
    """
    from specdec_check.suite import _properties as props

    params = []
    for kind, samplers, table in (("verifier", verifiers, props.VERIFIER_PROPERTIES),
                                  ("generator", generators, props.GENERATOR_PROPERTIES)):
        names = list(table) if checks is None else [c for c in checks if c in table]
        if checks is not None:
            unknown = [c for c in checks if c not in props.VERIFIER_PROPERTIES and c not in props.GENERATOR_PROPERTIES]
            if unknown:
                raise ValueError(f"unknown check(s) {unknown}; choose from {sorted(props.VERIFIER_PROPERTIES)} "
                                 f"or {sorted(props.GENERATOR_PROPERTIES)}.")
        for sampler in samplers:
            label = getattr(sampler, "__name__", type(sampler).__name__)
            for name in names:
                prop = table[name]
                marks = [pytest.mark.specdec_statistical] if prop.statistical else []
                params.append(pytest.param(props.Check(kind, sampler, prop), marks=marks, id=f"{label}-{name}"))
    if not params:
        raise ValueError("parametrize_with_checks needs at least one verifier or generator and one known check.")
    return pytest.mark.parametrize("check", params)
