"""Each option and each rule name is defined once (issue 25): the ``check_*`` keywords, the command line's flags
and the pytest plugin's options are all read off the one option table (``specdec_check/_options.py``), and the
rule and drafting-scheme names live in ``specdec_check/_settings.py`` alone."""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path

import pytest

from specdec_check import checker
from specdec_check._options import OPTIONS, api_options, cli_options, plugin_options
from specdec_check._settings import DRAFTING_SCHEMES, KINDS, RULES

ROOT = Path(checker.__file__).resolve().parents[2]
#: What ships: the package and the strategies installed with it.
SHIPPED = [p for folder in ("specdec_check", "strategies") for p in sorted((ROOT / folder).rglob("*.py"))]
CHECKS = {"verifier": checker.check_verifier, "tree_verifier": checker.check_tree_verifier,
          "ragged_verifier": checker.check_ragged_verifier, "generator": checker.check_generator}


def test_every_option_has_one_row_in_the_table():
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("kind", list(CHECKS))
def test_each_check_function_takes_exactly_the_tables_options_with_its_defaults(kind):
    signature = inspect.signature(CHECKS[kind])
    parameters = list(signature.parameters.values())[1:]  # after the sampler
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters)
    assert {p.name: p.default for p in parameters} == {o.name: o.default for o in api_options(kind)}


def _flags(subparser) -> set:
    return {flag for action in subparser._actions for flag in action.option_strings if flag.startswith("--")} - {"--help"}


@pytest.mark.parametrize("kind", list(CHECKS))
def test_each_subcommand_shows_exactly_the_tables_flags(kind):
    from specdec_check._cli._parser import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = commands.choices[KINDS[kind].command]
    assert _flags(sub) == {o.flag for o in cli_options(kind)}


def test_the_plugin_registers_exactly_the_tables_options():
    from specdec_check import pytest_plugin

    seen = []

    class Group:
        def addoption(self, *flags, **_):
            seen.extend(flags)

    class Parser:
        def getgroup(self, *_a, **_k):
            return Group()

        def addini(self, *_a, **_k):
            pass

    pytest_plugin.pytest_addoption(Parser())
    table = {o.plugin for o in plugin_options()}
    assert table <= set(seen) and set(seen) - table == {names.option for names in KINDS.values()}


def _literal_tuples(names: tuple) -> list:
    """Files of the package that spell ``names`` out as a literal sequence."""
    pattern = re.compile(r"[\(\[]\s*" + r",\s*".join(re.escape(repr(n)).replace("'", "[\"']") for n in names))
    return sorted(str(p.relative_to(ROOT)) for p in SHIPPED if pattern.search(p.read_text()))


@pytest.mark.parametrize("names", [RULES, DRAFTING_SCHEMES], ids=["rules", "drafting schemes"])
def test_rule_and_scheme_names_are_spelled_out_in_one_place(names):
    assert _literal_tuples(names) == ["specdec_check/_settings.py"]


def test_ci_runs_the_readmes_two_test_commands_in_order():
    """The README's "Two commands" section names the fast tier and the full suite; `.ci/run` runs exactly
    those, fast first; pyproject's addopts makes the bare command the fast tier."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    section = root.joinpath("README.md").read_text().split("## Two commands on a fresh machine", 1)[1].split("\n## ", 1)[0]
    commands = [line.split("&&")[-1].strip() for line in re.findall(r"^.*python -m pytest.*$", section, re.M)]
    assert len(commands) == 2 and commands[1] == commands[0] + ' -m "slow or not slow"'
    ci = [line.strip() for line in root.joinpath(".ci/run").read_text().splitlines() if line.startswith("python -m pytest")]
    assert ci == commands
    addopts = tomllib.loads(root.joinpath("pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert '-m "not slow"' in addopts
