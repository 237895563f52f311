"""The state of one pytest session of the suite: what is tested, its alpha ledger, its profile.

The pytest plugin builds one :class:`SuiteSession` in ``pytest_configure`` and keeps it in
``config.stash``; fixtures hand it (or parts of it) to tests. Importing this module costs
nothing: Hypothesis and the statistics engine load only when a suite test asks for them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .._settings import KINDS as KIND_NAMES

__all__ = ["DEFAULT_EXAMPLE_ALPHA", "PROFILES", "STATISTICAL_MARKER", "Selection", "SuiteLedger", "SuiteSession",
           "register_profiles"]

#: Per-example alpha of a ``parametrize_with_checks`` check called without a ledger: a user who
#: runs a few hundred such examples a day sees a false alarm once in thousands of years.
DEFAULT_EXAMPLE_ALPHA = 1e-9

#: Hypothesis profiles of the suite (name -> settings keywords; ``specdec-ci`` extends ``ci``):
#: quick is a smoke run, default and ci run 50 examples per property (enough for the catalogue's
#: suite-detectable bugs), thorough 200.
PROFILES = {
    "specdec-quick": {"max_examples": 5},
    "specdec-default": {"max_examples": 50},
    "specdec-ci": {"max_examples": 50},
    "specdec-thorough": {"max_examples": 200},
}

STATISTICAL_MARKER = "specdec_statistical"


@dataclass(frozen=True)
class Selection:
    """One resolved setting: its value and where it came from (``option --x``, ``env X``, ``ini x``, ``default``)."""

    name: str
    value: str | None
    source: str

    @property
    def is_default(self) -> bool:
        return self.source == "default"


def register_profiles() -> None:
    """Register the suite's Hypothesis profiles (idempotent)."""
    from hypothesis import HealthCheck, settings

    common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
    for name, kwargs in PROFILES.items():
        if name == "specdec-ci":
            settings.register_profile(name, settings.get_profile("ci"), **kwargs)
        else:
            settings.register_profile(name, **common, **kwargs)


class SuiteLedger:
    """Hands each statistical example its alpha: ``total / planned`` from an :class:`~specdec_check.stats.AlphaLedger`.

    The first ``plan[nodeid]`` examples of a test spend from the ledger; later calls
    of that test (Hypothesis shrinking or replaying a failure) get the same alpha
    without spending, because they only happen once the run has failed. ``session``
    (when the plugin made the ledger) gives the suite's Hypothesis settings.
    """

    def __init__(self, total: float, plan: dict, session: "SuiteSession | None" = None):
        from specdec_check.stats import AlphaLedger

        self.plan = dict(plan)
        self.ledger = AlphaLedger(total, planned=max(1, sum(self.plan.values())))
        self.calls: dict = {}
        self.session = session
        self.current: str = "<outside a test>"  # set by the plugin before each test runs

    @property
    def per_example(self) -> float:
        return self.ledger.per_check

    def alpha(self, nodeid: str | None = None) -> float:
        """Alpha for one example of test ``nodeid`` (default: the test now running)."""
        nodeid = (self.session.current if self.session is not None else self.current) if nodeid is None else nodeid
        n = self.calls.get(nodeid, 0)
        self.calls[nodeid] = n + 1
        if n < self.plan.get(nodeid, 0):
            return self.ledger.spend(f"{nodeid}#{n}")
        return self.ledger.per_check

    def mark(self) -> dict:
        """The examples each test has drawn so far (to measure what a run spends, :meth:`spent_since`)."""
        return dict(self.calls)

    def spent_since(self, mark: dict) -> dict:
        """``{nodeid: examples drawn since mark}``: what a run in a forked child spent, for :meth:`absorb`."""
        return {k: n - mark.get(k, 0) for k, n in self.calls.items() if n > mark.get(k, 0)}

    def absorb(self, spent) -> None:
        """Spend in this (parent) ledger what a forked child's copy spent (:meth:`spent_since`)."""
        for nodeid, n in (spent or {}).items():
            for _ in range(n):
                self.alpha(nodeid)

    def settings(self, **overrides):
        """The suite's Hypothesis settings (see :meth:`SuiteSession.settings`)."""
        if self.session is not None:
            return self.session.settings(**overrides)
        from hypothesis import settings

        return settings(**overrides) if overrides else settings()

    def __repr__(self):
        return f"SuiteLedger({self.ledger!r})"


class SuiteSession:
    """One pytest session's specdec-check state (kept in ``config.stash``).

    ``selections`` maps verifier, generator, backend, device, dtype and alpha to their
    :class:`Selection`; ``explicit_profile`` is the ``--hypothesis-profile`` given (if any);
    ``plan`` maps each statistical test's node id to its planned examples; ``current`` is the
    node id of the test running now.
    """

    def __init__(self, selections: dict, alpha: float, explicit_profile: str | None = None):
        self.selections = selections
        self.alpha = alpha
        self.explicit_profile = explicit_profile
        self.plan: dict = {}
        self.current = "<outside a test>"
        self._ledger: SuiteLedger | None = None
        self._profile: tuple | None = None  # (name or None for the user's, why)
        self.worker_ledgers: list = []  # under pytest-xdist, on the controller: each worker's ledger_summary()

    # -- what is tested --------------------------------------------------------------------------
    def options(self) -> dict:
        """``{"backend", "device", "dtype", "strict"}`` for check_verifier / check_generator."""
        sel = self.selections
        def flag(name):
            return name in sel and str(sel[name].value).strip().lower() in ("1", "true", "yes", "on")

        options = {"backend": sel["backend"].value, "device": sel["device"].value, "dtype": sel["dtype"].value,
                   "strict": flag("strict")}
        if flag("degenerate"):
            options["degenerate"] = True
        if "rule" in sel and sel["rule"].value not in (None, "standard"):
            options["rule"] = sel["rule"].value  # verifiers only
        return options

    def sampler(self, kind: str):
        """The selected sampler of ``kind`` ("verifier" or "generator"), imported; an ``exec:COMMAND`` or
        ``lib:FILE:SYMBOL`` value is a sampler in another process or language (notes/PROTOCOL.md)."""
        from .._settings import CallableNotFound, resolve_callable

        sel = self.selections[kind]
        if sel.value.startswith(("exec:", "lib:")):
            from ..foreign import foreign_sampler

            try:
                return foreign_sampler(sel.value, kind)
            except ValueError as exc:
                raise CallableNotFound(f"{sel.value!r} ({sel.source}): {exc}") from None
        return resolve_callable(sel.value, what=kind, source=sel.source)

    # -- Hypothesis settings ---------------------------------------------------------------------
    def profile(self) -> tuple:
        """``(name, why)``: the suite's profile, or ``(None, why)`` when the user chose one (never overridden)."""
        if self._profile is None:
            from hypothesis import settings

            register_profiles()
            current = settings.get_current_profile_name()
            base = current.split("-with-")[0]
            if self.explicit_profile or base not in ("default", "ci"):
                self._profile = (None, f"{current!r}, chosen by the user")
            elif base == "ci":
                self._profile = ("specdec-ci", "specdec-ci (Hypothesis' 'ci' profile is active: CI is set)")
            else:
                self._profile = ("specdec-default", "specdec-default (no profile chosen)")
        return self._profile

    def settings(self, **overrides):
        """The Hypothesis ``settings`` for suite properties: the user's profile when they chose one
        (``--hypothesis-profile`` or a profile loaded in conftest.py), else ``specdec-ci`` under CI or
        ``specdec-default``. Verbosity and phases always follow the active profile."""
        from hypothesis import settings

        name = self.profile()[0]
        if name is None:
            return settings(**overrides) if overrides else settings()
        current = settings()
        return settings(settings.get_profile(name), verbosity=current.verbosity, phases=current.phases, **overrides)

    def examples(self) -> int:
        """Examples each statistical property runs under :meth:`settings`."""
        return int(self.settings().max_examples)

    # -- the false-alarm ledger ----------------------------------------------------------------------
    def ledger(self) -> SuiteLedger:
        if self._ledger is None:
            self._ledger = SuiteLedger(self.alpha, self.plan, session=self)
        return self._ledger

    @property
    def ledger_started(self) -> bool:
        return self._ledger is not None

    # -- pytest-xdist: one ledger for the session, split by test id ---------------------------------
    def ledger_summary(self) -> dict:
        """What this process's ledger spent, in builtins (an xdist worker sends it to the controller)."""
        led = self.ledger().ledger
        return {"total": float(led.total), "planned": int(led.planned), "per_check": float(led.per_check),
                "checks_spent": int(led.checks_spent)}

    def xdist_header(self, workers: int) -> str:
        return (f"specdec-check: pytest-xdist with {workers} workers: one false-alarm budget alpha={self.alpha:g} for "
                "the whole session; every worker collects every test, so each statistical example's share "
                "(alpha / planned examples) is fixed by its test id, whichever worker runs it")

    def xdist_summary(self) -> str:
        """The session's spending summed over the xdist workers' ledgers (:meth:`ledger_summary`)."""
        shares = {w["per_check"] for w in self.worker_ledgers}
        checks = sum(w["checks_spent"] for w in self.worker_ledgers)
        total = self.worker_ledgers[0]["total"]
        if len(shares) > 1:  # workers collected different tests: their shares do not add up to one budget
            return (f"specdec-check: the {len(self.worker_ledgers)} xdist workers planned different budgets "
                    f"(per-example alpha {sorted(shares)}): the session's false-alarm budget is not {total:g}")
        per = shares.pop()
        return (f"specdec-check: spent alpha {per * checks:.3g} of {total:g} on {checks} statistical examples "
                f"({per:.3g} each) over {len(self.worker_ledgers)} pytest-xdist workers (one ledger, split by test id)")

    def header(self) -> list:
        sel = self.selections
        given = [kind for kind in sel if kind in KIND_NAMES and not sel[kind].is_default]
        lines = [
            f"specdec-check: verifier {sel['verifier'].value} ({sel['verifier'].source}); "
            f"generator {sel['generator'].value} ({sel['generator'].source})",
            ("specdec-check: running the bundled properties of the kind(s) given only: " + ", ".join(given)
             if given else "specdec-check: no sampler given: the bundled properties check the bundled references"),
            f"specdec-check: backend {sel['backend'].value} ({sel['backend'].source}), "
            f"device {sel['device'].value or 'default'} ({sel['device'].source}), "
            f"dtype {sel['dtype'].value or 'default'} ({sel['dtype'].source}); "
            f"false-alarm budget alpha={self.alpha:g} per run ({sel['alpha'].source})",
        ]
        degenerate = self.options().get("degenerate")
        lines.append("specdec-check: verifier inputs drawn with 1-4 rows, gamma " + ("0" if degenerate else "1")
                     + "-4, V " + ("1" if degenerate else "2") + "-8 (statistical properties: gamma <= 3, V <= 6, "
                     "tiled to 64 rows per call); decode loops: V 2-3, gamma 1-3, 1-5 new tokens"
                     + ("" if degenerate else "; degenerate shapes (gamma = 0, V = 1) need --specdec-degenerate"))
        if self.options().get("rule"):
            lines.append(f"specdec-check: verifiers judged under rule {self.options()['rule']!r} "
                         f"({sel['rule'].source}): only exactness decides")
        if self.options()["strict"]:
            lines.append(f"specdec-check: robustness warnings count as failures (strict, {sel['strict'].source})")
        env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("SPECDEC")}
        if env:  # shown to catch typos, as array-api-tests does
            lines.append("specdec-check: env " + " ".join(f"{k}={v}" for k, v in env.items()))
        return lines

