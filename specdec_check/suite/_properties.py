"""The properties of the installed suite, as plain functions plus the strategies that feed them.

Each property takes the sampler, keyword arguments drawn by Hypothesis, the
example's ``seed`` (drawn, never hidden entropy, so failures replay and shrink),
its ``alpha`` (from the run's ledger) and the checker ``options`` (backend,
device, dtype). It returns nothing and raises ``AssertionError`` with the
evidence and a one-line repro when the sampler is wrong.

Statistical properties call :func:`specdec_check.checker.check_verifier` /
``check_generator`` restricted to one check in ``mode="quick"``; structural ones
(identical rows, disjoint supports, determinism, the output contract) look at
the sampler's outputs directly and spend no alpha.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from hypothesis import note
from hypothesis import strategies as st

from specdec_check.strategies import ModelPair, VerifierInputs, markov_model_pairs, verifier_inputs

__all__ = [
    "GENERATOR_PROPERTIES",
    "TREE_VERIFIER_PROPERTIES",
    "VERIFIER_PROPERTIES",
    "Check",
    "GeneratorCase",
    "Property",
    "PropertyFailure",
    "generator_cases",
    "seeds",
    "suite_params",
]

#: Rows per verifier call in statistical properties: the drawn rows are tiled to this many.
ROWS_PER_CALL = 64
#: Mode of the checker inside each example (each example is small; power comes from many examples).
MODE = "quick"


def seeds() -> st.SearchStrategy[int]:
    """The sampler's seed for one example (shrinks towards 0)."""
    return st.integers(0, 2**32 - 1)


# --------------------------------------------------------------------------- helpers

def _name(sampler) -> str:
    from specdec_check.checker.core.callables import qualified_name

    return qualified_name(sampler)


def _lit(value) -> str:
    """A Python literal with double-quoted strings (so the shell-quoted ``python -c`` line stays readable)."""
    import json

    if isinstance(value, str) or (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
        return json.dumps(list(value) if isinstance(value, tuple) else value)
    return repr(value)


def _array_src(arr: np.ndarray) -> str:
    return f"np.array({np.asarray(arr).tolist()!r})"


def _checker_options(options: dict, *, kind: str = "verifier") -> dict:
    """The suite's options as check_* keywords (the rule applies to verifiers only)."""
    keys = ("backend", "device", "dtype", "strict") + (("rule",) if kind == "verifier" else ())
    return {k: options[k] for k in keys if options.get(k) is not None}


def _options_src(options: dict, *, kind: str = "verifier") -> str:
    return "".join(f", {k}={_lit(v)}" for k, v in _checker_options(options, kind=kind).items()
                   if not (k == "backend" and v == "numpy") and not (k == "strict" and v is False))


#: Characters of one evidence value in a property's failure message (a whole output array of a large
#: example would fill the screen; the repro line recomputes it in full).
EVIDENCE_CHARS = 300


class PropertyFailure(AssertionError):
    """A property of the suite does not hold: the message is the whole story (the findings in the words the
    CLI prints, the example's evidence, one repro line), and :meth:`compact` adds the example Hypothesis
    shrank to, so that one failure is one screen of text (the plugin prints it without a traceback)."""

    def compact(self) -> "PropertyFailure":
        """A copy whose message ends with Hypothesis' falsifying example (its other notes, such as the lines
        only failing examples ran, say nothing about the sampler)."""
        notes = [note for note in getattr(self, "__notes__", ()) if note.startswith("Falsifying example")]
        return PropertyFailure("\n".join([str(self), *notes]))


def _fail(title: str, evidence: dict, repro: str, findings=()):
    """Raise the property's ``AssertionError``: the title, the checker's findings in the words the CLI prints
    (:meth:`~specdec_check.checker.core.report.Finding.line`), the example's evidence, one repro line."""
    from specdec_check._escape import clip

    lines = [title]
    lines += [f"  {f.line()}" for f in findings]
    lines += [f"  {k}: {clip(str(v), EVIDENCE_CHARS)}" for k, v in evidence.items()]
    lines.append(f"repro: {repro}")
    raise PropertyFailure("\n".join(lines))


def _backend(options: dict):
    from specdec_check.checker.backends import make_backend

    return make_backend(options.get("backend") or "numpy", device=options.get("device"), dtype=options.get("dtype"))


def _call_verifier(verify, inputs: VerifierInputs, seed: int, options: dict) -> tuple[np.ndarray, list]:
    """Call ``verify`` on the inputs in the backend's form; returns the host output and the inputs it modified."""
    backend = _backend(options)
    kwargs = backend.verifier_inputs(**inputs.kwargs())
    before = {k: backend.copy(v) for k, v in kwargs.items()}
    out = verify(**kwargs, generator=backend.generator(seed))
    mutated = [k for k in kwargs if not backend.same(kwargs[k], before[k])]
    return np.asarray(backend.to_host(out)), mutated


def _python_repro(code: str) -> str:
    """``python -c CODE``, shell-quoted: pasting it into a shell runs exactly ``code``."""
    return shlex.join(["python", "-c", code])


def _structural_repro(verify, inputs: VerifierInputs, seed: int, options: dict) -> str:
    return _python_repro(
        "import numpy as np, pkgutil; from specdec_check.checker.backends import make_backend; "
        f"b = make_backend({_lit(options.get('backend') or 'numpy')}, device={_lit(options.get('device'))}, "
        f"dtype={_lit(options.get('dtype'))}); v = pkgutil.resolve_name({_lit(_name(verify))}); "
        f"print(v(**b.verifier_inputs(np.array({inputs.draft_token_ids.tolist()!r}), "
        f"{_array_src(inputs.draft_probs)}, {_array_src(inputs.target_probs)}), generator=b.generator({seed})))"
    )


def _rows_scenario(inputs: VerifierInputs):
    from specdec_check.scenarios import VerifierScenario

    reps = -(-ROWS_PER_CALL // inputs.rows)
    target = np.tile(inputs.target_probs, (reps, 1, 1))[:ROWS_PER_CALL]
    draft = np.tile(inputs.draft_probs, (reps, 1, 1))[:ROWS_PER_CALL]
    return VerifierScenario.from_rows(f"suite-{inputs.case}", target_probs=target, draft_probs=draft,
                                      description=f"{inputs.rows} drawn rows tiled to {ROWS_PER_CALL}"), reps


def _check_verifier(verify, inputs: VerifierInputs, check: str, *, seed: int, alpha: float, options: dict,
                    fail_on=("failure",)) -> None:
    from specdec_check.checker import check_verifier

    scenario, reps = _rows_scenario(inputs)
    report = check_verifier(verify, scenarios=[scenario], mode=MODE, checks=[check], seed=seed, alpha=alpha,
                            name=_name(verify), **_checker_options(options))
    note(f"{check}: {inputs!r} seed={seed} alpha={alpha:.3g} verdict={report.verdict}")
    bad = [f for f in report.findings if f.kind in fail_on]
    if bad:
        repro = _python_repro(
            "import numpy as np, pkgutil; from specdec_check.checker import check_verifier; "
            "from specdec_check.scenarios import VerifierScenario; "
            f"v = pkgutil.resolve_name({_lit(_name(verify))}); "
            f"s = VerifierScenario.from_rows({_lit(scenario.name)}, target_probs=np.tile({_array_src(inputs.target_probs)}, "
            f"({reps}, 1, 1))[:{ROWS_PER_CALL}], draft_probs=np.tile({_array_src(inputs.draft_probs)}, "
            f"({reps}, 1, 1))[:{ROWS_PER_CALL}]); "
            f"print(check_verifier(v, scenarios=[s], mode={_lit(MODE)}, checks=[{_lit(check)}], seed={seed}, "
            f"alpha={alpha!r}{_options_src(options)}).summary())"
        )
        evidence = {"inputs": repr(inputs), "seed": seed, "alpha": f"{alpha:.3g}"}
        _fail(f"{_name(verify)} fails the {check!r} property", evidence, repro, bad)


# --------------------------------------------------------------------------- verifier properties

def _statistical(check: str, fail_on=("failure",)):
    def run(verify, *, inputs: VerifierInputs, seed: int, alpha: float, options: dict) -> None:
        _check_verifier(verify, inputs, check, seed=seed, alpha=alpha, options=options, fail_on=fail_on)

    run.__name__ = f"verifier_{check}"
    return run


def _contract_problem(out, mutated, inputs: VerifierInputs, options: dict):
    """``(message, evidence)`` of the first contract violation or event of probability zero in one call's
    output, in the words of the checker's own oracle (:mod:`specdec_check.checker.chain.contract`, at the
    backend's per-dtype tolerance: what ``check_verifier`` and the CLI say); None when there is none."""
    from specdec_check.checker.chain.contract import check_output, dropped_final, impossible_events

    if mutated:
        return f"the verifier modified its input(s) {mutated} in place", {}
    # an event's message names its row, position, token and probabilities; its evidence adds the tolerance
    problem, step = check_output(out, inputs.draft_token_ids, inputs.vocab_size)
    if problem is not None:
        return problem
    backend = _backend(options)
    events = [dropped_final(step, inputs.draft_token_ids, out)] + impossible_events(
        step, inputs.draft_token_ids, backend.law_rows(inputs.draft_probs), backend.law_rows(inputs.target_probs),
        tolerance=backend.tolerance)
    for event in events:
        if event is not None:
            return event[0], {"tolerance": backend.tolerance} if backend.tolerance else {}
    return None


def verifier_contract(verify, *, inputs: VerifierInputs, seed: int, alpha: float, options: dict) -> None:
    """Output contract: int [B, gamma+1]; accepted drafts, then one possible token, then -1; inputs untouched.

    Judged by the checker's own contract oracle (:mod:`specdec_check.checker.chain.contract`), at the
    backend's per-dtype tolerance: the same rules and the same tolerance as ``check_verifier``.
    """
    out, mutated = _call_verifier(verify, inputs, seed, options)
    problem = _contract_problem(out, mutated, inputs, options)
    if problem is not None:
        _fail(problem[0], {"inputs": repr(inputs), "seed": seed, "output": out.tolist(), **problem[1]},
              _structural_repro(verify, inputs, seed, options))


def _structural(verify, inputs: VerifierInputs, seed: int, options: dict, holds, title: str) -> None:
    """One call on ``inputs``: a contract violation or event of probability zero fails in the checker's words
    (:func:`_contract_problem`), then ``holds(out)`` must be true, else ``title`` fails."""
    out, mutated = _call_verifier(verify, inputs, seed, options)
    problem = _contract_problem(out, mutated, inputs, options)
    if problem is None and holds(out):
        return
    message, evidence = problem if problem is not None else (title, {})
    _fail(message, {"inputs": repr(inputs), "seed": seed, "drafts": inputs.draft_token_ids.tolist(),
                    "output": out.tolist(), **evidence}, _structural_repro(verify, inputs, seed, options))


def verifier_identical_accepts_all(verify, *, inputs: VerifierInputs, seed: int, alpha: float, options: dict) -> None:
    """Target == draft: every draft is accepted and the bonus token has positive target probability."""
    gamma = inputs.gamma
    _structural(verify, inputs, seed, options,
                lambda out: np.array_equal(out[:, :gamma], inputs.draft_token_ids) and bool((out[:, gamma] >= 0).all()),
                "with target == draft every draft must be accepted, then a bonus token drawn from the last target row")


def verifier_disjoint_rejects_first(verify, *, inputs: VerifierInputs, seed: int, alpha: float,
                                    options: dict) -> None:
    """Disjoint supports: the first draft is rejected and the recovered token comes from the target's support."""
    _structural(verify, inputs, seed, options, lambda out: bool((out[:, 1:] == -1).all()),
                "with disjoint supports the first draft (target probability 0) must be rejected and exactly one "
                "token with positive target probability emitted")


def verifier_determinism(verify, *, inputs: VerifierInputs, seed: int, alpha: float, options: dict) -> None:
    """Two calls from the same generator state on the same inputs give the same output."""
    first, _ = _call_verifier(verify, inputs, seed, options)
    second, _ = _call_verifier(verify, inputs, seed, options)
    if first.shape != second.shape or not np.array_equal(first, second):
        _fail("two calls with the same generator state gave different outputs: the verifier draws randomness "
              "other than from its generator argument",
              {"inputs": repr(inputs), "seed": seed, "first": first.tolist(), "second": second.tolist()},
              _structural_repro(verify, inputs, seed, options))


@dataclass(frozen=True)
class Property:
    """One property of the suite: its runner, the strategies of its inputs, and whether it spends alpha."""

    name: str
    kind: str
    statistical: bool
    run: Callable = field(repr=False)
    strategies: Callable[[dict], dict] = field(repr=False)
    doc: str = ""
    #: A law of the standard rule itself: skipped when verifiers are judged under rule="any".
    standard_only: bool = False

    @property
    def test_name(self) -> str:
        """The name Hypothesis reports a falsifying example under (``test_<name>``, ``test_generator_<name>``)."""
        return f"test_{self.name}" if self.kind != "generator" else f"test_generator_{self.name}"

    def check(self, sampler, *, ledger=None, options=None, isolate: bool = True) -> None:
        """Run the property on ``sampler`` as a Hypothesis test.

        With a ledger (the ``specdec_ledger`` fixture) each statistical example takes its alpha
        from it and the test runs under the suite's Hypothesis settings; without one, under the
        active profile at :data:`~specdec_check.suite._session.DEFAULT_EXAMPLE_ALPHA`. ``options``
        (the ``specdec_checker_options`` fixture) gives backend, device and dtype.

        ``isolate`` (the default) runs the test in a forked child
        (:func:`specdec_check._isolation.run_isolated`): a sampler that calls ``os._exit(0)``,
        ``sys.exit`` or kills its process then fails this property instead of ending pytest with
        status 0. Alpha spent in the child is spent in the ledger too.
        """
        options = dict(options or {"backend": "numpy"})
        if self.standard_only and options.get("rule", "standard") != "standard":
            import pytest

            pytest.skip(f"{self.name!r} tests the standard rule's own law; under rule={options['rule']!r} the "
                        "'completed' property decides")
        if not isolate:
            try:
                return _run_property(self, sampler, ledger, options)
            except PropertyFailure as exc:
                raise exc.compact() from None
        from .._isolation import IsolationError, run_isolated

        try:
            spent = run_isolated(_run_property, self, sampler, ledger, options)
        except PropertyFailure as exc:  # the child's traceback says nothing the message does not
            raise exc.compact() from None
        except IsolationError as exc:
            raise AssertionError(f"{_name(sampler)}: the {self.name!r} property did not finish: the sampler "
                                 f"{exc.how} (a sampler must return or raise an Exception, never end or kill its "
                                 "process)") from None
        if ledger is not None:
            ledger.absorb(spent)


#: The suite's default domain is the contract's (gamma >= 1, V >= 2); degenerate shapes (gamma = 0,
#: V = 1) are drawn only with --specdec-degenerate (options["degenerate"]).
DOMAIN = {"min_gamma": 1, "min_vocab": 2}


def _inputs(**kw) -> Callable[[dict], dict]:
    def strategies(options: dict) -> dict:
        domain = {} if options.get("degenerate") else {k: max(v, kw.get(k, 0)) for k, v in DOMAIN.items()}
        return {"inputs": verifier_inputs(**{**kw, **domain}), "seed": seeds()}

    return strategies


_STAT = {"max_rows": 3, "max_gamma": 3, "max_vocab": 6}

VERIFIER_PROPERTIES = {
    p.name: p for p in [
        Property("contract", "verifier", False, verifier_contract, _inputs(max_rows=4, max_gamma=4),
                 "the output contract"),
        Property("identical_accepts_all", "verifier", False, verifier_identical_accepts_all,
                 _inputs(min_gamma=1, cases=["identical"]), "target == draft accepts every draft"),
        Property("disjoint_rejects_first", "verifier", False, verifier_disjoint_rejects_first,
                 _inputs(min_gamma=1, cases=["disjoint"]), "disjoint supports reject at the first position"),
        Property("determinism", "verifier", False, verifier_determinism, _inputs(),
                 "determinism for a fixed generator state"),
        Property("step_law", "verifier", True, _statistical("step_law"), _inputs(**_STAT),
                 "the step law P(k accepted, final token y) along each drafted path", standard_only=True),
        Property("first_token", "verifier", True, _statistical("first_token"), _inputs(**_STAT),
                 "the first emitted token follows the first target row"),
        Property("stop_conditional", "verifier", True, _statistical("stop_conditional"), _inputs(min_gamma=1, **_STAT),
                 "the token at the stop position follows the residual (or bonus) law", standard_only=True),
        Property("accepted_count", "verifier", True, _statistical("accepted_count"), _inputs(min_gamma=1, **_STAT),
                 "the number of accepted drafts follows its exact law", standard_only=True),
        Property("completed", "verifier", True, _statistical("completed"), _inputs(min_gamma=1, **_STAT),
                 "one step completed by the exact target follows the target's law (any lossless rule)"),
        Property("efficiency", "verifier", True, _statistical("efficiency", ("failure", "inefficiency")),
                 _inputs(min_gamma=1, **_STAT), "accepts as often as the optimal rule min(1, p/q)"),
        Property("independence", "verifier", True, _statistical("independence"),
                 _inputs(**{**_STAT, "min_rows": 2}), "outputs independent across calls and across rows"),
        Property("batch_invariance", "verifier", True, _statistical("batch_invariance"), _inputs(**_STAT),
                 "a row's law does not depend on the rows beside it", standard_only=True),
    ]
}


# --------------------------------------------------------------------------- generator properties

@dataclass(frozen=True, eq=False)
class GeneratorCase:
    """Models, speculation length, output length and prompt for one decode-loop example."""

    models: ModelPair
    gamma: int
    max_new_tokens: int
    prompt: tuple

    def __repr__(self) -> str:
        return (f"GeneratorCase({self.models!r}, gamma={self.gamma}, max_new_tokens={self.max_new_tokens}, "
                f"prompt={list(self.prompt)})")

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis / IPython pretty-printing
        printer.text(repr(self))


@st.composite
def generator_cases(draw, *, max_vocab: int = 3, max_gamma: int = 3, max_new_tokens: int = 5,
                    max_prompt: int = 2) -> GeneratorCase:
    """A :class:`GeneratorCase` small enough for the exact joint law of the generated tokens (at most
    3^5 = 243 outcomes). Up to 5 new tokens leave room for a step after a fully accepted one (gamma up
    to 3), where a loop that forgets to feed its bonus token back shows: with at most 3 tokens the
    joint property caught such a loop in 7 of 200 examples, with 5 in 44 of 200."""
    models = draw(markov_model_pairs(min_vocab=2, max_vocab=max_vocab))
    vocab = models.vocab_size
    prompt = tuple(draw(st.lists(st.integers(0, vocab - 1), max_size=max_prompt)))
    return GeneratorCase(models, draw(st.integers(1, max_gamma)), draw(st.integers(1, max_new_tokens)), prompt)


def _check_generator(generate, case: GeneratorCase, check: str, *, seed: int, alpha: float, options: dict) -> None:
    from specdec_check import checker
    from specdec_check.scenarios import GeneratorScenario

    prompts = np.array([list(case.prompt) or [-1]], dtype=np.int64)
    scenario = GeneratorScenario(f"suite-{case.models.case}", case.models.target, case.models.draft, case.gamma,
                                 case.max_new_tokens, prompts=prompts)
    report = checker.check_generator(generate, scenarios=[scenario], mode=MODE, checks=[check], seed=seed,
                                     alpha=alpha, name=_name(generate), **_checker_options(options, kind="generator"))
    note(f"{check}: {case!r} seed={seed} alpha={alpha:.3g} verdict={report.verdict}")
    bad = report.failures
    if bad:
        t, d = case.models.target, case.models.draft
        repro = _python_repro(
            "import numpy as np, pkgutil; from specdec_check import MarkovModel; "
            "from specdec_check.checker import check_generator; from specdec_check.scenarios import GeneratorScenario; "
            f"g = pkgutil.resolve_name({_lit(_name(generate))}); "
            f"s = GeneratorScenario({_lit(scenario.name)}, MarkovModel({_array_src(t.probs)}, order={t.order}), "
            f"MarkovModel({_array_src(d.probs)}, order={d.order}), {case.gamma}, {case.max_new_tokens}, "
            f"prompts=np.array({prompts.tolist()!r})); "
            f"print(check_generator(g, scenarios=[s], mode={_lit(MODE)}, checks=[{_lit(check)}], seed={seed}, "
            f"alpha={alpha!r}{_options_src(options, kind='generator')}).summary())"
        )
        evidence = {"case": repr(case), "seed": seed, "alpha": f"{alpha:.3g}"}
        _fail(f"{_name(generate)} fails the {check!r} property", evidence, repro, bad)


def _generator_statistical(check: str):
    def run(generate, *, case: GeneratorCase, seed: int, alpha: float, options: dict) -> None:
        _check_generator(generate, case, check, seed=seed, alpha=alpha, options=options)

    run.__name__ = f"generator_{check}"
    return run


def _cases(options: dict) -> dict:
    return {"case": generator_cases(), "seed": seeds()}


GENERATOR_PROPERTIES = {
    p.name: p for p in [
        Property("joint", "generator", True, _generator_statistical("joint"), _cases,
                 "the joint law of the generated tokens equals the target's"),
        Property("target_calls", "generator", True, _generator_statistical("target_calls"), _cases,
                 "target calls per generated token match the exact expectation"),
    ]
}


# --------------------------------------------------------------------------- tree-verifier properties

#: Rows per tree-verifier call in the suite: the drawn case's rows, repeated (fresh drafts every call).
TREE_ROWS_PER_CALL = 64


def _tree_drafting(verify) -> str:
    """The scheme a tree verifier declares (``verify.drafting``); top-k, the common case, when it does not."""
    return getattr(verify, "drafting", None) or "topk"


def _tree_scenario(case):
    from specdec_check.scenarios import TreeScenario

    tile = (TREE_ROWS_PER_CALL, 1, 1)
    return TreeScenario.from_rows("suite-tree", parents=case.parents,
                                  target_probs=np.tile(case.target_probs[None], tile),
                                  draft_probs=np.tile(case.draft_probs[None], tile),
                                  description=f"one drawn tree and its rows, repeated {TREE_ROWS_PER_CALL} times")


def _tree_repro(verify, case, check: str, seed: int, alpha: float, options: dict) -> str:
    return _python_repro(
        "import numpy as np, pkgutil; from specdec_check.checker import check_tree_verifier; "
        "from specdec_check.suite._properties import _tree_scenario; from specdec_check.strategies import TreeCase; "
        f"v = pkgutil.resolve_name({_lit(_name(verify))}); "
        f"c = TreeCase(np.array({case.parents.tolist()!r}), {_array_src(case.target_probs)}, "
        f"{_array_src(case.draft_probs)}); "
        f"print(check_tree_verifier(v, drafting={_lit(_tree_drafting(verify))}, scenarios=[_tree_scenario(c)], "
        f"mode={_lit(MODE)}, checks=[{_lit(check)}], seed={seed}, alpha={alpha!r}"
        f"{_options_src(options, kind='tree_verifier')}).summary())"
    )


def _tree_check(check: str, statistical: bool):
    def run(verify, *, case, seed: int, alpha: float, options: dict) -> None:
        from specdec_check.checker import check_tree_verifier

        checks = [check] if statistical else ["contract", "impossible"]
        report = check_tree_verifier(verify, drafting=_tree_drafting(verify), scenarios=[_tree_scenario(case)],
                                     mode=MODE, checks=checks, seed=seed, alpha=alpha, name=_name(verify),
                                     **_checker_options(options, kind="tree_verifier"))
        note(f"{check}: {case!r} seed={seed} alpha={alpha:.3g} verdict={report.verdict}")
        if report.failures:
            evidence = {"case": repr(case), "seed": seed, "alpha": f"{alpha:.3g}"}
            _fail(f"{_name(verify)} fails the tree {check!r} property", evidence,
                  _tree_repro(verify, case, checks[0], seed, alpha, options), report.failures)

    run.__name__ = f"tree_{check}"
    return run


def _tree_cases(options: dict) -> dict:
    from specdec_check.strategies import tree_cases

    return {"case": tree_cases(full_support=True), "seed": seeds()}


TREE_VERIFIER_PROPERTIES = {
    p.name: p for p in [
        Property("tree_contract", "tree_verifier", False, _tree_check("contract", False), _tree_cases,
                 "the tree contract (a root path of the tree, then one token) and no event of probability zero"),
        Property("tree_sequence_law", "tree_verifier", True, _tree_check("sequence_law", True), _tree_cases,
                 "every position of the emitted sequence follows its exact law given the tree"),
        Property("tree_accepted_length", "tree_verifier", True, _tree_check("accepted_length", True), _tree_cases,
                 "the accepted length follows its exact law under the scheme's reference rule"),
    ]
}


def _run_property(prop: Property, sampler, ledger, options: dict):
    """The Hypothesis test of ``prop`` on ``sampler``; returns what it spent of ``ledger`` (see
    :meth:`SuiteLedger.spent_since`), so a forked child's spending reaches the parent's ledger."""
    from hypothesis import given, settings

    from ._session import DEFAULT_EXAMPLE_ALPHA

    mark = ledger.mark() if ledger is not None else None
    statistical = prop.statistical and ledger is not None
    run = prop.run

    def body(**drawn):
        run(sampler, alpha=ledger.alpha() if statistical else DEFAULT_EXAMPLE_ALPHA, options=options, **drawn)

    body.__name__ = body.__qualname__ = prop.test_name
    chosen = ledger.settings() if ledger is not None else settings()
    try:
        chosen(given(**prop.strategies(options))(body))()
    finally:
        spent = ledger.spent_since(mark) if ledger is not None else None
    return spent


class Check:
    """One property bound to one sampler, for :func:`specdec_check.suite.parametrize_with_checks`.

    ``check(ledger=None, options=None)`` runs :meth:`Property.check`.
    """

    def __init__(self, kind: str, sampler, prop: Property):
        self.kind, self.sampler, self.prop = kind, sampler, prop

    def __call__(self, ledger=None, options=None) -> None:
        self.prop.check(self.sampler, ledger=ledger, options=options)

    def __repr__(self) -> str:
        return f"Check({self.prop.name!r}, {getattr(self.sampler, '__name__', self.sampler)!r})"


def suite_params(properties: dict) -> list:
    """``pytest.param`` s of ``properties`` for a parametrized suite test: ids are the property names,
    statistical ones carry the ``specdec_statistical`` marker (the plugin plans their alpha)."""
    import pytest

    return [pytest.param(p, id=name, marks=[pytest.mark.specdec_statistical] if p.statistical else [])
            for name, p in properties.items()]
