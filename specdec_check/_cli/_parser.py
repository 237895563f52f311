"""The command line's parser: every check subcommand's flags come from the option table
(:mod:`specdec_check._options`); the other subcommands (mutants, demo, report) declare their own."""

from __future__ import annotations

from pathlib import Path

from .._options import cli_options, option as table_option, positive_int, rendered_formats, seed_value
from .._settings import KINDS, default_sampler
from ._errors import PROG, Parser

__all__ = ["CHECK_EPILOG", "KIND_OF", "build_parser"]

#: subcommand -> sampler kind.
KIND_OF = {names.command: kind for kind, names in KINDS.items()}
#: Exit status epilog of every check subcommand (one table: :data:`specdec_check._report_rules.VERDICT_EXIT_STATUS`).
CHECK_EPILOG = ("Exit status: 0 passed (or lossless but inefficient), 1 failed (also a sampler that ends its process "
                "or runs past --timeout, or an interrupted run's partial report), 4 inconclusive (the law tests could "
                "not reach the mode's design TV), 2 usage error, 3 internal error, 130 / 143 interrupted by SIGINT / "
                "SIGTERM (partial report).")

#: The check subcommands: (command, help, description).
CHECK_COMMANDS = (
    ("verify", "check a chain verifier (one step's accept/reject kernel)",
     "Check that a verifier reproduces the target law exactly; print a verdict table and write "
     "report.json/.md/.html."),
    ("generate", "check a decode loop",
     "Check that a speculative decode loop samples the target's joint law exactly; print a verdict table and "
     "write the report."),
    ("tree", "check a tree verifier (multi-draft accept/reject kernel)",
     "Check that a tree verifier reproduces the target law exactly on trees drafted with the given scheme; print a "
     "verdict table and write the report."),
    ("ragged", "check a production verifier (logits in, ragged requests with their own sampling parameters)",
     "Check a verifier in the production calling convention (vLLM v1 RejectionSampler style: ragged requests, "
     "logits, temperature, top-k, top-p, greedy rows); print a verdict table and write the report."),
    ("sample", "check a token sampler (temperature / top-k / top-p / min-p kernel)",
     "Check that a token sampler draws exactly from its processed law (ties and boundaries included) at TV 1e-3 in "
     "default mode; print a verdict table and write the report."),
)


def add_check_options(sub, command: str) -> None:
    """The positional sampler and every option the table shows for ``command``'s kind."""
    kind = KIND_OF[command]
    names = KINDS[kind]
    sub.add_argument("callable", nargs="?", metavar="MODULE:CALLABLE",
                     help=f"the {names.role} to check (default: {default_sampler(kind, 'numpy')}; with --backend "
                          f"torch: {default_sampler(kind, 'torch')})")
    groups = {}
    for option in cli_options(kind):
        kwargs = dict(option.cli)
        short = kwargs.pop("short", None)
        target = sub
        if option.group is not None:
            if option.group not in groups:
                groups[option.group] = sub.add_mutually_exclusive_group()
            target = groups[option.group]
        flags = (short, option.flag) if short else (option.flag,)
        target.add_argument(*flags, dest=option.name, default=option.default, help=option.help, **kwargs)


def _add_mutants(sub) -> None:
    mutants = sub.add_parser("mutants", help="mutation score of the bug catalogue",
                             description="Run the checker on every catalogued bug and exact control and print "
                                         "the mutation table.",
                             epilog="Exit status: 0 every bug detected and every control passed, 1 otherwise, "
                                    "2 usage error.")
    mutants.add_argument("names", nargs="*", metavar="NAME", help="catalogue entries to run (default: all)")
    for name in ("mode", "seed"):  # the check subcommands' own flags, from the one option table
        entry = table_option(name)
        kwargs = {k: v for k, v in entry.cli.items() if k != "short"}
        mutants.add_argument(entry.flag, dest=name, default=entry.default, help=entry.help, **kwargs)
    mutants.add_argument("--no-progress", action="store_true", help="no progress bar")
    mutants.add_argument("--trees", action="store_true", help="run the tree catalogue (tree verifiers) instead")
    mutants.add_argument("--ragged", action="store_true",
                         help="the ragged catalogue (production calling convention) instead of the chain one")
    mutants.add_argument("--token-samplers", action="store_true",
                         help="the token-sampler catalogue (top-k / top-p / min-p kernels and drafters' samplers)")


#: The kinds record / replay can write and answer (the process protocol's, notes/PROTOCOL.md).
RECORD_KINDS = ("verifier", "token_sampler")


def _add_record(sub) -> None:
    record = sub.add_parser("record", help="write a check's planned calls to files, to run the kernel anywhere",
                            description="Run a check with the bundled reference answering, and write every call it "
                                        "makes (inputs as .npy, the 64-bit seed, the reference's answer) and "
                                        "manifest.json into --out (notes/PROTOCOL.md, 'Record and replay'). Every "
                                        "other option is the check's (--mode, --seed, --scenarios, --checks, ...: "
                                        "as for verify or sample) and is passed on.",
                            epilog="Exit status: the check's (0 when the recording finished), 2 usage error.")
    record.add_argument("--kind", choices=RECORD_KINDS, default="verifier", help="sampler kind (default: verifier)")
    record.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder to write the calls into")


def _add_replay(sub) -> None:
    replay = sub.add_parser("replay", help="judge a kernel's outputs of recorded calls",
                            description="Run the recorded check again, each call answered by OUTPUTS/<id>.npy: the "
                                        "same tests, report and verdicts as a live run, the recorded budget in place of "
                                        "sequential stopping.", epilog=CHECK_EPILOG)
    replay.add_argument("inputs", type=Path, metavar="INPUTS", help="the folder record wrote")
    replay.add_argument("outputs", type=Path, metavar="OUTPUTS", help="the kernel's outputs, <id>.npy per call")
    replay.add_argument("--report", type=Path, default=None, metavar="DIR", help="report folder (default: "
                        "INPUTS/replay-report)")
    replay.add_argument("--no-progress", action="store_true", help="no progress bar")
    replay.add_argument("-q", "--quiet", action="store_true", help="print only the verdict line")


def _add_demo(sub) -> None:
    demo = sub.add_parser("demo", help="the corpus-bigram figures",
                          description="Speculative decoding on the corpus-bigram scenario: measured against exact "
                                      "acceptance, tokens per step and speedup.")
    demo.add_argument("--tokens", type=positive_int, default=200_000, help="tokens to generate (default: %(default)s)")
    demo.add_argument("--seed", type=seed_value, default=0, help="seed (default: %(default)s)")


def _add_report(sub) -> None:
    report = sub.add_parser("report", help="re-render a saved report.json",
                            description="Validate a saved report.json and render it again as Markdown and/or HTML "
                                        "(nothing is re-run).",
                            epilog="Exit status: the saved verdict (0 passed or inefficient, 1 failed, 4 inconclusive, "
                                   "1 interrupted); 2 when the file cannot be read, is not a valid report (a FIFO or "
                                   "device, too large or too deeply nested, not matching the schema) or its \"passed\" "
                                   "contradicts its findings.")
    report.add_argument("path", metavar="REPORT.json", type=Path, help="a report.json (or the folder holding one)")
    report.add_argument("--format", dest="formats", type=rendered_formats, action="append", default=None,
                        metavar="FMT[,FMT...]",
                        help="formats to render: md,html (comma-separated or repeated, as for verify; default: both)")
    report.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="folder to write into (default: the folder of REPORT.json)")
    report.add_argument("--stdout", action="store_true", help="print the rendered document instead of writing it")
    report.add_argument("--no-plots", action="store_true", help="leave the figures out of the HTML")
    report.add_argument("--force", action="store_true", help="replace the report of another run in the --out folder")


def build_parser() -> Parser:
    from .. import __version__

    parser = Parser(prog=PROG, description="Statistical exactness checks for speculative-decoding samplers.",
                    epilog=CHECK_EPILOG)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    for command, help_text, description in CHECK_COMMANDS:
        add_check_options(sub.add_parser(command, help=help_text, description=description, epilog=CHECK_EPILOG),
                          command)
    _add_mutants(sub)
    _add_record(sub)
    _add_replay(sub)
    _add_demo(sub)
    _add_report(sub)
    return parser


#: Width of the generated synopsis (the README's command-line block).
SYNOPSIS_WIDTH = 100


def synopsis() -> str:
    """Every subcommand's usage line, as the parser has it, wrapped at :data:`SYNOPSIS_WIDTH` columns: the
    README's command-line block (tests/cli test that the two agree)."""
    import argparse

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    blocks = []
    for name, command in sub.choices.items():
        formatter = argparse.HelpFormatter(command.prog, width=SYNOPSIS_WIDTH)
        formatter.add_usage(command.usage, command._actions, command._mutually_exclusive_groups, prefix="")
        blocks.append(formatter.format_help().strip())
    return "\n".join(blocks)
