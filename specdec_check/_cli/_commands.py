"""The subcommands that run no check of their own: mutants (the catalogue's score), demo, report."""

from __future__ import annotations

import sys

from ._errors import UsageError
from ._progress import make_progress

__all__ = ["run_demo", "run_mutants", "run_record", "run_replay", "run_report"]

#: The check subcommand of each recordable kind.
_COMMAND_OF = {"verifier": "verify", "token_sampler": "sample"}
#: The options of a recorded check that must not travel into the replay (they name the run's files or outputs).
_LOCAL = ("--report", "--force", "--format", "--no-report", "--no-progress", "-q", "--quiet")


def run_mutants(args) -> int:
    from ..bugs import (format_mutation_table, mutation_score, ragged_mutation_score, token_mutation_score,
                        tree_mutation_score)

    chosen = [flag for flag in ("trees", "ragged", "token_samplers") if getattr(args, flag, False)]
    if len(chosen) > 1:
        raise UsageError(f"choose one catalogue: {' or '.join('--' + c.replace('_', '-') for c in chosen)}")
    progress = make_progress(not args.no_progress, desc="mutants")
    score_of = {"trees": tree_mutation_score, "ragged": ragged_mutation_score,
                "token_samplers": token_mutation_score}.get(chosen[0] if chosen else None, mutation_score)
    try:
        score = score_of(args.mode, seed=args.seed, names=args.names or None, progress=progress)
    except KeyError as exc:
        raise UsageError(str(exc.args[0]) if exc.args else "unknown catalogue entry") from None
    finally:
        if progress is not None:
            progress.close()
    print(format_mutation_table(score))
    return int(score.exit_code)


def _check_args(options) -> list:
    """The check options of a record command (a sampler path among them is refused: record runs the reference)."""
    options = list(options)
    if options and options[0] == "--":
        options = options[1:]
    if options and not options[0].startswith("-"):
        raise UsageError(f"record runs the bundled reference; give only the check's options, not {options[0]!r}")
    return options


def run_record(args) -> list:
    """The check command line that records (the dispatcher runs it: record is a check with the reference)."""
    import json

    options = _check_args(args.options)
    folder = args.out
    if folder.exists() and any(folder.iterdir()):
        raise UsageError(f"--out {str(folder)!r} is not empty; record into a new folder")
    folder.mkdir(parents=True, exist_ok=True)
    kept = [o for o in options if o.split("=")[0] not in _LOCAL]
    (folder / "manifest.json").write_text(json.dumps(
        {"protocol": 1, "kind": args.kind, "command": _COMMAND_OF[args.kind], "options": kept}, indent=2) + "\n")
    return [_COMMAND_OF[args.kind], f"record:{folder}", *options, "--report", str(folder / "report"), "--force"]


def run_replay(args) -> list:
    """The check command line that replays (the dispatcher runs it)."""
    import json

    try:
        manifest = json.loads((args.inputs / "manifest.json").read_text())
        command, options = manifest["command"], list(manifest["options"])
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"{str(args.inputs)!r} holds no manifest.json written by specdec-check record ({exc})") from None
    report = args.report or args.inputs / "replay-report"
    extra = ["--report", str(report), "--force"] + (["--no-progress"] if args.no_progress else []) + (
        ["-q"] if args.quiet else [])
    return [command, f"replay:{args.inputs}:{args.outputs}", *options, *extra]


def run_demo(args) -> int:
    try:
        from .._demo import run_demo
    except ImportError as exc:
        raise UsageError(f"the demo is not available: {type(exc).__name__}: {exc}") from None
    return int(run_demo(tokens=args.tokens, seed=args.seed, out=sys.stdout) or 0)


def run_report(args) -> int:
    from ..report import ReportDirError, escaped, exit_status, load_report, render_html, render_markdown, rerender_report

    formats = list(dict.fromkeys(f for group in (args.formats or [("md", "html")]) for f in group))
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
    from ..report import render_text

    return render_text(data)


