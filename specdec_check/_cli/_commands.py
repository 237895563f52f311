"""The subcommands that run no check of their own: mutants (the catalogue's score), demo, report."""

from __future__ import annotations

import sys

from ._errors import UsageError
from ._progress import make_progress

__all__ = ["run_demo", "run_mutants", "run_report"]


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


