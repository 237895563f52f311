"""The ``specdec-check`` command line (also ``python -m specdec_check``).

Subcommands: ``verify``, ``generate``, ``tree``, ``ragged``, ``mutants``, ``demo``, ``report``.
Exit status (one table, :data:`specdec_check._report_rules.VERDICT_EXIT_STATUS`): 0 passed
(or lossless but inefficient), 1 failed (including a sampler that raises, ends or kills its
process, or runs past ``--timeout``), 4 inconclusive (the law tests could not reach the
mode's design TV), 2 usage error (bad option, unimportable callable, unreadable report, a
--report folder that is a file, lies under a file, is not writable or holds another run's
report without --force), each reported on one line; 3 is an internal error of
specdec-check itself (with its traceback); 130 / 143 after SIGINT / SIGTERM (a partial
report marked ``interrupted`` is written first). ``verify``, ``generate`` and ``ragged`` run the
check in a child process (:mod:`specdec_check._isolation`): only a verdict received from it can
give 0, and nothing printed (a closed pipe, a full disk) changes the status. ``report``
exits with the status of the saved verdict (1 for an interrupted run), and 2 for a file that
is not a valid report or whose ``passed`` contradicts its findings. Heavy modules (the
checker, matplotlib, torch) are imported only by the subcommand that needs them.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
from pathlib import Path

from ._settings import BACKENDS, DEFAULT_ALPHA, DEFAULT_BACKEND, DEFAULT_MODE, DEFAULT_RULE, DEFAULT_SEED, KINDS, \
    MODES, RULES, \
    CallableNotFound, default_sampler
from ._settings import resolve_callable as _resolve

__all__ = ["TqdmProgress", "UsageError", "default_report_dir", "main", "make_progress", "resolve_callable"]

PROG = "specdec-check"
#: subcommand -> sampler kind.
_KIND_OF = {names.command: kind for kind, names in KINDS.items()}

REPORT_FORMATS = ("json", "md", "html")

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
#: Exit status epilog of verify / generate.
_CHECK_EPILOG = ("Exit status: 0 passed (or lossless but inefficient), 1 failed (also a sampler that ends its process "
                 "or runs past --timeout), 4 inconclusive (the law tests could not reach the mode's design TV), "
                 "2 usage error, 3 internal error, 130 / 143 interrupted by SIGINT / SIGTERM (partial report).")


class UsageError(Exception):
    """A mistake on the command line: reported on one line, exit status 2."""


class _ParseError(UsageError):
    """An error found by argparse (gets a ``--help`` hint)."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) raised as :class:`UsageError`."""

    def error(self, message):
        raise _ParseError(message)


# --------------------------------------------------------------------------- helpers


def resolve_callable(path: str, *, what: str = "object", require_callable: bool = False):
    """Import ``module:attr`` (or ``module.attr``) and return it; :class:`UsageError` otherwise
    (:func:`specdec_check._settings.resolve_callable` with the command line's error type)."""
    try:
        return _resolve(path, what=what, require_callable=require_callable)
    except CallableNotFound as exc:
        raise UsageError(str(exc)) from None


def _resolve_sampler(path: str, kind: str):
    return resolve_callable(path, what=kind, require_callable=True)


def default_report_dir(path: str, *, mode: str, seed: int, backend: str = "numpy", root="reports") -> Path:
    """``reports/<MODULE.CALLABLE>-<mode>-seed<seed>`` (see :func:`specdec_check.report.default_report_dir`)."""
    from .report import default_report_dir as _default_report_dir

    return _default_report_dir(path, mode=mode, seed=seed, backend=backend, root=root)


def _mode_label(args) -> str:
    """The mode as a report folder names it: ``thorough``, or ``thorough-tv0.001`` with a ``--tv`` that
    changes it (every digit, as the repro line has it)."""
    from ._settings import target_tv

    tv = target_tv(_mode(args)) if getattr(args, "tv", None) is not None else None
    return args.mode if tv is None else f"{args.mode}-tv{tv!r}"


def _mode(args):
    """The mode to run: the named one, or it sized to ``--tv`` (:func:`specdec_check.mode_for_tv`)."""
    from ._settings import mode_for_tv

    tv = getattr(args, "tv", None)
    return args.mode if tv is None else mode_for_tv(tv, args.mode)


def _target_tv(args):
    """The ``--tv`` as repro lines carry it: None when it leaves the mode as it is."""
    from ._settings import target_tv

    return target_tv(_mode(args)) if getattr(args, "tv", None) is not None else None


def _report_folder(args, path):
    """``(folder, run identity)`` of a verify/generate run, checked before anything runs.

    ``(None, None)`` with ``--no-report``; a folder that cannot take the report is a usage error.
    """
    if args.no_report:
        return None, None
    from .report import ReportDirError, RunIdentity, escaped, prepare_report_dir

    mode = _mode_label(args)
    identity = RunIdentity.for_command(args.command, path, mode=mode, seed=args.seed, backend=args.backend)
    folder = args.report or default_report_dir(path, mode=mode, seed=args.seed, backend=args.backend)
    try:
        prepare_report_dir(folder, force=args.force, run_identity=identity)
    except ReportDirError as exc:
        raise UsageError(f"cannot write the report to {escaped(exc)}") from None
    return folder, identity


class TqdmProgress:
    """Adapter from the checker's ``progress(done, total, label)`` to a tqdm bar on stderr.

    The bar is created on the first call; tqdm's ``disable=None`` keeps it silent when
    stderr is not a terminal. Call :meth:`close` when the run ends.
    """

    def __init__(self, *, file=None, disable=None, desc: str = ""):
        self._file = file if file is not None else sys.stderr
        self._disable = disable
        self._desc = desc
        self._bar = None

    def __call__(self, done: int, total: int, label: str = "") -> None:
        from tqdm import tqdm

        if self._bar is None:
            self._bar = tqdm(total=total, file=self._file, disable=self._disable, desc=self._desc, leave=False,
                             dynamic_ncols=True, unit="step")
        if total is not None and total != self._bar.total:
            self._bar.total = total
        if label:
            self._bar.set_postfix_str(str(label), refresh=False)
        if int(done) > self._bar.n:
            self._bar.update(int(done) - self._bar.n)
        elif label:  # a new label (the supervisor's calls count) and the elapsed time, shown now
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def make_progress(enabled: bool = True, *, desc: str = ""):
    """A :class:`TqdmProgress`, or ``None`` when disabled, tqdm is missing or stderr is not a terminal."""
    if not enabled:
        return None
    isatty = getattr(sys.stderr, "isatty", None)
    if not (isatty and isatty()):
        return None
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return None
    return TqdmProgress(desc=desc)


def _checks(text):
    if text is None:
        return None
    names = tuple(c.strip() for c in text.split(",") if c.strip())
    if not names:
        raise argparse.ArgumentTypeError("expected a comma-separated list of check names")
    return names


def _formats(text):
    names = tuple(c.strip() for c in text.split(",") if c.strip())
    bad = [n for n in names if n not in REPORT_FORMATS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"choose from {','.join(REPORT_FORMATS)} (comma-separated); got {text!r}")
    return names


def _seed(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer; got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer; got {text!r}")
    return value


def _positive(text):
    value = _seed(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a positive integer; got 0")
    return value


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value >= 0.0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0 (0: no limit); got {text!r}")
    return value


def _probability(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1); got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1); got {text!r}")
    return value


# --------------------------------------------------------------------------- parser


def _add_check_options(sub, command: str):
    from ._isolation import DEFAULT_TIMEOUT_S

    kind = _KIND_OF[command]
    numpy_default, torch_default = default_sampler(kind, "numpy"), default_sampler(kind, "torch")
    sub.add_argument("callable", nargs="?", metavar="MODULE:CALLABLE",
                     help=f"the {'decode loop' if kind == 'generator' else kind.replace('_', ' ')} to check "
                          f"(default: {numpy_default}; with --backend torch: {torch_default})")
    sub.add_argument("--mode", choices=tuple(MODES), default=DEFAULT_MODE, help="how hard to look (default: %(default)s)")
    sub.add_argument("--tv", type=_probability, default=None, metavar="TV",
                     help="target resolution: size the law tests to detect this total-variation distance (e.g. "
                          "--mode thorough --tv 1e-3 plans ~4.5e7 rows per scenario, which verifier and tree scenarios "
                          "run as ~170 shards that --workers or --scheduler spread); default: the mode's own")
    sub.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND, help="array backend (default: %(default)s)")
    sub.add_argument("--device", default=None, help="torch device, e.g. cuda:0 (torch backend)")
    sub.add_argument("--dtype", default=None, help="dtype the sampler sees, e.g. float32 (default: the backend's)")
    sub.add_argument("--seed", type=_seed, default=DEFAULT_SEED, help="seed of the whole run (default: %(default)s)")
    sub.add_argument("--alpha", type=_probability, default=DEFAULT_ALPHA,
                     help="false-alarm budget of the whole run (default: %(default)g)")
    if kind in ("verifier", "tree_verifier"):
        sub.add_argument("--rule", choices=RULES, default=DEFAULT_RULE,
                         help="judge against the standard rule (Leviathan et al. 2023; for trees the scheme's "
                              "reference rule; default) or any lossless rule (block verification, sampled match, "
                              "traversal verification, ...: only exactness decides)")
    sub.add_argument("--strict", action="store_true",
                     help="count robustness warnings (NaN input rows, degenerate shapes) as failures")
    sub.add_argument("--checks", type=_checks, default=None, metavar="NAME[,NAME...]",
                     help="run only these checks (default: all)")
    sub.add_argument("--scenarios", default=None, metavar="MODULE:ATTR",
                     help="a scenario list, or a callable returning one (default: the built-in battery)")
    sub.add_argument("--scenario", dest="scenario_names", action="append", default=None, metavar="NAME",
                     help="run only the scenario(s) of this name; repeatable (e.g. to reproduce a finding)")
    sub.add_argument("--report", default=None, metavar="DIR", type=Path,
                     help="report folder, checked before the run (default: reports/<MODULE.CALLABLE>-<mode>-seed<seed>)")
    sub.add_argument("--force", action="store_true", help="replace the report of another run in the report folder")
    sub.add_argument("--format", dest="formats", type=_formats, default=REPORT_FORMATS, metavar="FMT[,FMT...]",
                     help="report files to write: json,md,html (default: all)")
    sub.add_argument("--no-report", action="store_true", help="write no report files")
    sub.add_argument("--no-plots", action="store_true", help="leave the figures out of report.html")
    sub.add_argument("--no-progress", action="store_true", help="no progress bar")
    sub.add_argument("--timeout", type=_seconds, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                     help="limit on one call of the sampler; a call past it stops the run with a 'timeout' "
                          "finding and a partial report (default: %(default)g; 0: no limit)")
    sub.add_argument("-q", "--quiet", action="store_true", help="print only the verdict line")
    scale = sub.add_mutually_exclusive_group()
    scale.add_argument("--workers", type=_positive, default=1, metavar="N",
                       help="run the scenarios in N local processes (default: 1, in this process); the report is "
                            "the same, timings aside. --timeout does not reach worker processes")
    scale.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run the scenarios on the Dask cluster whose scheduler is at ADDRESS "
                            "(tcp://host:8786; needs pip install distributed); the report is the same, timings aside")


#: Seconds to wait for a Dask scheduler (--scheduler): long enough for a busy cluster to answer, short enough
#: for a wrong address to fail while the user still watches.
SCHEDULER_TIMEOUT_S = 30


def _executor(args):
    """``(executor, client)`` for --workers / --scheduler: None (this process), a number of local processes, or a
    Dask client's executor (the client is closed after the run); UsageError when the cluster cannot be reached."""
    if getattr(args, "scheduler", None):
        try:
            from distributed import Client
        except ImportError:
            raise UsageError("--scheduler needs Dask's distributed package: pip install distributed") from None
        try:
            client = Client(args.scheduler, timeout=SCHEDULER_TIMEOUT_S, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise UsageError(f"cannot reach the Dask scheduler at {args.scheduler!r}: {exc}") from None
        return client.get_executor(), client
    workers = getattr(args, "workers", 1)
    return (workers if workers > 1 else None), None


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(
        prog=PROG,
        description="Statistical exactness checks for speculative-decoding samplers.",
        epilog="Exit status: 0 passed (or lossless but inefficient), 1 failed, 2 usage error, 4 inconclusive (not enough evidence).",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_Parser)

    verify = sub.add_parser("verify", help="check a verifier (one step's accept/reject kernel)",
                            description="Check that a verifier reproduces the target law exactly; print a verdict "
                                        "table and write report.json/.md/.html.",
                            epilog=_CHECK_EPILOG)
    _add_check_options(verify, "verify")

    generate = sub.add_parser("generate", help="check a decode loop",
                              description="Check that a speculative decode loop samples the target's joint law "
                                          "exactly; print a verdict table and write the report.",
                              epilog=_CHECK_EPILOG)
    _add_check_options(generate, "generate")

    tree = sub.add_parser("tree", help="check a tree verifier (multi-draft accept/reject kernel)",
                          description="Check that a tree verifier reproduces the target law exactly on trees drafted "
                                      "with the given scheme; print a verdict table and write the report.",
                          epilog="Exit status: 0 passed, 1 failed, 2 usage error.")
    _add_check_options(tree, "tree")
    tree.add_argument("--drafting", choices=("iid", "without_replacement", "topk"), default=None,
                      help="how the drafter chooses a node's children: independently, without replacement, or the "
                           "deterministic top-k (default: the callable's .drafting attribute, else topk)")

    ragged = sub.add_parser("ragged", help="check a ragged verifier (logits in, per-request sampling parameters)",
                            description="Check a verifier in the production calling convention (vLLM v1 "
                                        "RejectionSampler style: ragged requests, logits, temperature, top-k, top-p, "
                                        "greedy rows); print a verdict table and write the report.",
                            epilog=_CHECK_EPILOG)
    _add_check_options(ragged, "ragged")

    mutants = sub.add_parser("mutants", help="mutation score of the bug catalogue",
                             description="Run the checker on every catalogued bug and exact control and print "
                                         "the mutation table.",
                             epilog="Exit status: 0 every bug detected and every control passed, 1 otherwise, "
                                    "2 usage error.")
    mutants.add_argument("names", nargs="*", metavar="NAME", help="catalogue entries to run (default: all)")
    mutants.add_argument("--mode", choices=tuple(MODES), default=DEFAULT_MODE, help="checker mode (default: %(default)s)")
    mutants.add_argument("--seed", type=_seed, default=DEFAULT_SEED, help="checker seed (default: %(default)s)")
    mutants.add_argument("--no-progress", action="store_true", help="no progress bar")
    mutants.add_argument("--trees", action="store_true", help="run the tree catalogue (tree verifiers) instead")
    mutants.add_argument("--ragged", action="store_true",
                         help="the ragged catalogue (production calling convention) instead of the chain one")

    demo = sub.add_parser("demo", help="the corpus-bigram figures",
                          description="Speculative decoding on the corpus-bigram scenario: measured against exact "
                                      "acceptance, tokens per step and speedup.")
    demo.add_argument("--tokens", type=_positive, default=200_000, help="tokens to generate (default: %(default)s)")
    demo.add_argument("--seed", type=_seed, default=0, help="seed (default: %(default)s)")

    report = sub.add_parser("report", help="re-render a saved report.json",
                            description="Validate a saved report.json and render it again as Markdown and/or HTML "
                                        "(nothing is re-run).",
                            epilog="Exit status: the saved verdict (0 passed or inefficient, 1 failed, 4 inconclusive, "
                                   "1 interrupted); 2 when the file cannot be read, is not a valid report (a FIFO or "
                                   "device, too large or too deeply nested, not matching the schema) or its \"passed\" "
                                   "contradicts its findings.")
    report.add_argument("path", metavar="REPORT.json", type=Path, help="a report.json (or the folder holding one)")
    report.add_argument("--format", dest="formats", choices=("md", "html"), action="append", default=None,
                        help="format to render; repeatable (default: md and html)")
    report.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="folder to write into (default: the folder of REPORT.json)")
    report.add_argument("--stdout", action="store_true", help="print the rendered document instead of writing it")
    report.add_argument("--no-plots", action="store_true", help="leave the figures out of the HTML")
    report.add_argument("--force", action="store_true", help="replace the report of another run in the --out folder")
    return parser


# --------------------------------------------------------------------------- commands


def _tree_drafting(drafting, sampler=None) -> str:
    """The tree command's scheme: ``--drafting``, else the callable's ``.drafting``, else top-k."""
    return drafting or getattr(sampler, "drafting", None) or "topk"


def _scenarios(path, names, command, args_drafting=None):
    """The scenarios to run: from ``--scenarios`` (or the default battery), filtered by ``--scenario``."""
    if path is None and not names:
        return None
    if path is None:
        from . import scenarios as bundled

        if command == "tree":
            found = tuple(bundled.default_tree_battery(_tree_drafting(args_drafting)))
        elif command == "ragged":
            found = tuple(bundled.default_ragged_battery())
        else:
            found = tuple(bundled.default_verifier_battery() if command == "verify"
                          else bundled.default_generator_battery())
    else:
        obj = resolve_callable(path, what="scenario list")
        if callable(obj):
            obj = obj()
        try:
            found = tuple(obj)
        except TypeError:
            raise UsageError(f"{path!r} is neither a scenario list nor a callable returning one") from None
    if names:
        known = [getattr(s, "name", None) for s in found]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(f"unknown scenario(s) {', '.join(map(repr, unknown))}; choose from {', '.join(known)}")
        found = tuple(s for s in found if s.name in names)
    return found


def _run_check(args) -> int:
    """verify / generate: the check runs in a child process (:func:`_check_in_child`); the report is
    written, then printed (:func:`_publish`); the status is the verdict received, never stdout's fate."""
    from ._isolation import DEFAULT_TIMEOUT_S, supervise_check

    path = args.callable or default_sampler(_KIND_OF[args.command], args.backend)
    folder, identity = _report_folder(args, path)  # a bad --report is a usage error before anything runs
    options = {"mode": args.mode, "tv": _target_tv(args), "seed": args.seed, "alpha": args.alpha if args.alpha != DEFAULT_ALPHA else None,
               "scenarios": args.scenarios, "backend": args.backend, "device": args.device, "dtype": args.dtype,
               "checks": args.checks, "strict": args.strict or None,
               "rule": getattr(args, "rule", DEFAULT_RULE) if getattr(args, "rule", DEFAULT_RULE) != DEFAULT_RULE else None,
               "timeout": args.timeout if args.timeout != DEFAULT_TIMEOUT_S else None}
    return supervise_check(functools.partial(_check_in_child, args, path), command=args.command, path=path,
                           options=options, fallback_header=_command_line_header(args, path),
                           publish=functools.partial(_publish, args, folder, identity),
                           usage_error=UsageError, progress=make_progress(not args.no_progress, desc=args.command),
                           call_timeout=args.timeout)


def _command_line_header(args, path) -> dict:
    """The report's run metadata as the command line gives it: the header of a report whose run ended
    before the checker planned it (the sampler's module exited on import); unknowns are None/empty."""
    return {"kind": _KIND_OF[args.command], "sampler": path, "mode": args.mode,
            "backend": args.backend, "device": args.device, "dtype": args.dtype or "", "tolerance": None,
            "seed": args.seed, "alpha": args.alpha, "alpha_per_check": args.alpha, "design_tv": None,
            "checks": list(args.checks or ()), "strict": bool(args.strict)}


def _check_in_child(args, path, channel):
    """The child's side of :func:`_run_check`: import the sampler and scenarios, run the check under a
    monitor that reports to the parent; return ``("report", data)``, ``("usage", message)``,
    ``("sampler", facts)`` or ``("internal", facts)``."""
    from ._isolation import ChannelMonitor

    kind = _KIND_OF[args.command]
    try:
        sampler = _resolve_sampler(path, kind)
        drafting = _tree_drafting(args.drafting, sampler) if args.command == "tree" else None
        scenarios = _scenarios(args.scenarios, args.scenario_names, args.command, drafting)
    except UsageError as exc:
        return ("usage", str(exc))
    monitor = ChannelMonitor(channel)
    try:
        executor, client = _executor(args)
    except UsageError as exc:
        return ("usage", str(exc))
    try:
        return _checked_in_child(args, path, kind, sampler, scenarios, drafting, monitor, executor)
    finally:
        if client is not None:
            client.close()


def _checked_in_child(args, path, kind, sampler, scenarios, drafting, monitor, executor):
    """The check itself, in the child, on ``executor`` (None: in the child's own process)."""
    from ._isolation import describe_exception
    from .checker import SAMPLER_KINDS, check_options, run
    from .checker._shards import ShardsLost

    try:
        if drafting is not None:
            from .checker._tree import tree_verifier_kind

            sampler_kind = tree_verifier_kind(drafting)
        else:
            sampler_kind = SAMPLER_KINDS[kind]
        rule = getattr(args, "rule", DEFAULT_RULE)
        options = check_options(sampler_kind.allowed_checks(rule), mode=_mode(args), backend=args.backend,
                                device=args.device, dtype=args.dtype, seed=args.seed, alpha=args.alpha,
                                checks=args.checks if args.checks is not None else sampler_kind.default_checks(rule),
                                progress=monitor.progress, strict=args.strict, name=path,
                                scenarios_source=args.scenarios, monitor=monitor, rule=rule, executor=executor)
    except (TypeError, ValueError, ImportError) as exc:
        return ("usage", f"{type(exc).__name__}: {' '.join(str(exc).split())}")
    try:
        report = run(sampler_kind, sampler, scenarios, options)
    except Exception as exc:
        if _raised_by(sampler, exc) or isinstance(exc, ShardsLost):  # the sampler crashed, or worker
            # processes died running it (the run cannot finish): a failed check, with a partial report
            return ("sampler", describe_exception(exc))
        if isinstance(exc, (TypeError, ValueError, ImportError)):
            # Raised before anything runs: a callable that breaks the contract, an unknown
            # check, a missing backend.
            return ("usage", f"{type(exc).__name__}: {' '.join(str(exc).split())}")
        return ("internal", describe_exception(exc, lines=None))
    return ("report", report.to_dict())


def _raised_by(sampler, exc) -> bool:
    """Whether ``exc`` came out of the sampler's own code (its frame is on the traceback)."""
    import inspect

    target = inspect.unwrap(sampler)
    code = getattr(target, "__code__", None) or getattr(getattr(type(target), "__call__", None), "__code__", None)
    if code is None:
        return False
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return True
        tb = tb.tb_next
    return False


def _publish(args, folder, identity, data):
    """Write the report files, then print the verdict and where they are (stdout may be gone by now)."""
    written = {}
    if folder is not None:
        from .report import ReportDirError, escaped, write_report

        try:
            written = write_report(data, folder, formats=args.formats, plots=not args.no_plots, force=args.force,
                                   run_identity=identity)
        except (ReportDirError, OSError) as exc:  # the folder changed during the run (another run took it)
            message = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageError(f"cannot write the report to {escaped(message)}") from None
    _emit(data, args)
    for fmt in REPORT_FORMATS:
        if fmt in written:
            print(f"report: {written[fmt]}")


def _emit(data, args):
    if getattr(args, "quiet", False):
        print(f"{data.get('sampler')}: {str(data.get('verdict')).upper()}")
        return
    from .report import render_text

    print(render_text(data))


def _run_mutants(args) -> int:
    from .bugs import format_mutation_table, mutation_score, ragged_mutation_score, tree_mutation_score

    progress = make_progress(not args.no_progress, desc="mutants")
    score_of = tree_mutation_score if args.trees else ragged_mutation_score if args.ragged else mutation_score
    try:
        score = score_of(args.mode, seed=args.seed, names=args.names or None, progress=progress)
    except KeyError as exc:
        raise UsageError(str(exc.args[0]) if exc.args else "unknown catalogue entry") from None
    finally:
        if progress is not None:
            progress.close()
    print(format_mutation_table(score))
    return int(score.exit_code)


def _run_demo(args) -> int:
    try:
        from ._demo import run_demo
    except ImportError as exc:
        raise UsageError(f"the demo is not available: {type(exc).__name__}: {exc}") from None
    return int(run_demo(tokens=args.tokens, seed=args.seed, out=sys.stdout) or 0)


def _run_report(args) -> int:
    from .report import ReportDirError, escaped, exit_status, load_report, render_html, render_markdown, rerender_report

    formats = list(dict.fromkeys(args.formats or ("md", "html")))
    if args.stdout and len(formats) != 1:
        raise UsageError("--stdout needs exactly one --format")
    try:
        if args.stdout:
            data = load_report(args.path)
        else:
            data, written = rerender_report(args.path, out=args.out, formats=formats, plots=not args.no_plots,
                                            force=args.force)
    except ReportDirError as exc:
        raise UsageError(f"cannot write the report to {escaped(exc)}") from None
    except (OSError, ValueError) as exc:
        message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        where = f"{exc.filename if getattr(exc, 'filename', None) else args.path}: " if isinstance(exc, OSError) else ""
        raise UsageError(f"cannot read report {escaped(where)}{escaped(' '.join(str(message).split()))}") from None
    if args.stdout:
        render = {"md": render_markdown, "html": lambda d: render_html(d, plots=not args.no_plots)}
        sys.stdout.write(render[formats[0]](data))
    else:
        print(_text(data))
        for fmt in formats:
            print(f"report: {written[fmt]}")
    return exit_status(data)


def _text(data):
    from .report import render_text

    return render_text(data)


_COMMANDS = {"verify": _run_check, "generate": _run_check, "tree": _run_check, "ragged": _run_check,
             "mutants": _run_mutants, "demo": _run_demo, "report": _run_report}


def main(argv=None) -> int:
    """Run the command line; return the exit status (0 passed, 1 failed, 2 usage error, 3 internal error,
    130 / 143 interrupted). Output goes through streams that swallow their own failures (a closed
    pipe, a full disk, a closed descriptor), so the status is the command's, never stdout's."""
    from ._isolation import tolerant_stdio

    argv = list(sys.argv[1:] if argv is None else argv)
    with tolerant_stdio():
        return _main(argv)


def _main(argv) -> int:
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help / --version
            return int(exc.code or 0)
        return _COMMANDS[args.command](args)
    except UsageError as exc:
        prefix = PROG if not argv or argv[0] not in _COMMANDS else f"{PROG} {argv[0]}"
        hint = f" (see '{prefix} --help')" if isinstance(exc, _ParseError) else ""
        print(f"{prefix}: error: {exc}{hint}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug in specdec-check itself: traceback, then one line, exit 3
        import traceback

        traceback.print_exc()
        print(f"{PROG}: internal error: {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_INTERNAL
