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

import sys

from ._check import default_report_dir, run_check
from ._commands import run_demo, run_mutants, run_record, run_replay, run_report
from ._errors import EXIT_INTERNAL, EXIT_USAGE, PROG, ParseError, UsageError, resolve_callable
from ._parser import build_parser
from ._progress import TqdmProgress, make_progress

__all__ = ["TqdmProgress", "UsageError", "build_parser", "default_report_dir", "main", "make_progress",
           "resolve_callable"]

_COMMANDS = {"verify": run_check, "generate": run_check, "tree": run_check, "ragged": run_check, "sample": run_check,
             "mutants": run_mutants, "demo": run_demo, "report": run_report, "record": run_record,
             "replay": run_replay}


def main(argv=None) -> int:
    """Run the command line; return the exit status (0 passed, 1 failed, 2 usage error, 3 internal error,
    130 / 143 interrupted). Output goes through streams that swallow their own failures (a closed
    pipe, a full disk, a closed descriptor), so the status is the command's, never stdout's."""
    from .._isolation import tolerant_stdio

    argv = list(sys.argv[1:] if argv is None else argv)
    with tolerant_stdio():
        return _main(argv)


def _main(argv) -> int:
    try:
        parser = build_parser()
        try:
            if argv[:1] == ["record"]:  # its own flags, then the check's options, passed on as they are
                args, args.options = parser.parse_known_args(argv)
            else:
                args = parser.parse_args(argv)
        except SystemExit as exc:  # --help / --version
            return int(exc.code or 0)
        status = _COMMANDS[args.command](args)
        return _main(status) if isinstance(status, list) else status  # record / replay: a check command line
    except UsageError as exc:
        prefix = PROG if not argv or argv[0] not in _COMMANDS else f"{PROG} {argv[0]}"
        hint = f" (see '{prefix} --help')" if isinstance(exc, ParseError) else ""
        print(f"{prefix}: error: {exc}{hint}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; a report not yet written was abandoned (a report folder is written whole "
              "or not at all)", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug in specdec-check itself: traceback, then one line, exit 3
        import traceback

        traceback.print_exc()
        print(f"{PROG}: internal error: {type(exc).__name__}: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_INTERNAL
