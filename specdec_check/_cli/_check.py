"""The check subcommands (verify, generate, tree, ragged): the check runs in a supervised child process
(:mod:`specdec_check._isolation`); the report is written, then printed; the exit status is the verdict
received, never stdout's fate."""

from __future__ import annotations

import functools
import math
from pathlib import Path

from .._settings import DEFAULT_ALPHA, DEFAULT_RULE, DEFAULT_TIMEOUT_S, DRAFTING_SCHEMES, default_sampler
from ._errors import UsageError, resolve_callable
from ._parser import KIND_OF
from ._progress import make_progress
from .._isolation._capture import OutputFile, redirect_output_to
from .._options import REPORT_FORMATS

__all__ = ["FOREIGN", "default_report_dir", "run_check"]

#: Prefixes of samplers outside this process (notes/PROTOCOL.md): a program, a shared library, recorded calls.
FOREIGN = ("exec:", "lib:", "record:", "replay:")


def _resolve_sampler(path: str, kind: str, processing=None):
    """The sampler ``path`` names: a Python ``MODULE:CALLABLE``, or a sampler outside this process (``exec:COMMAND``,
    a program speaking notes/PROTOCOL.md; ``lib:FILE:SYMBOL``, the C ABI), connected now so that a program that
    does not start or speaks another protocol version is a usage error before anything runs."""
    if path.startswith(FOREIGN):
        from ..foreign import foreign_sampler
        from ..foreign._exec import ProtocolVersionError

        try:
            sampler = foreign_sampler(path, kind, processing)
            if hasattr(sampler, "connect"):
                sampler.connect()
        except (ValueError, ProtocolVersionError) as exc:
            raise UsageError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - the program broke the protocol in its handshake
            raise UsageError(f"{path}: the handshake failed: {exc}") from None
        return sampler
    return resolve_callable(path, what=kind, require_callable=True)


def default_report_dir(path: str, *, mode: str, seed: int, backend: str = "numpy", root="reports") -> Path:
    """``reports/<MODULE.CALLABLE>-<mode>-seed<seed>`` (see :func:`specdec_check.report.default_report_dir`)."""
    from ..report import default_report_dir as _default_report_dir

    return _default_report_dir(path, mode=mode, seed=seed, backend=backend, root=root)


def _mode_label(args) -> str:
    """The mode as a report folder names it: ``thorough``, or ``thorough-tv0.001`` with a ``--tv`` that
    changes it (every digit, as the repro line has it)."""
    from .._settings import target_tv

    tv = target_tv(_mode(args)) if getattr(args, "tv", None) is not None else None
    return args.mode if tv is None else f"{args.mode}-tv{tv!r}"


def _mode(args):
    """The mode to run: the named one, or it sized to ``--tv`` (:func:`specdec_check.mode_for_tv`)."""
    from .._settings import mode_for_tv

    tv = getattr(args, "tv", None)
    return args.mode if tv is None else mode_for_tv(tv, args.mode)


def _target_tv(args):
    """The ``--tv`` as repro lines carry it: None when it leaves the mode as it is."""
    from .._settings import target_tv

    return target_tv(_mode(args)) if getattr(args, "tv", None) is not None else None


def _report_folder(args, path):
    """``(folder, run identity)`` of a verify/generate run, checked before anything runs.

    ``(None, None)`` with ``--no-report``; a folder that cannot take the report is a usage error.
    """
    if args.no_report:
        return None, None
    from ..report import ReportDirError, RunIdentity, escaped, prepare_report_dir

    mode = _mode_label(args)
    identity = RunIdentity.for_command(args.command, path, mode=mode, seed=args.seed, backend=args.backend)
    folder = args.report or default_report_dir(path, mode=mode, seed=args.seed, backend=args.backend)
    try:
        prepare_report_dir(folder, force=args.force, run_identity=identity)
    except ReportDirError as exc:
        raise UsageError(f"cannot write the report to {escaped(exc)}") from None
    return folder, identity


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


def _tree_drafting(drafting, sampler=None) -> str:
    """The tree command's scheme: ``--drafting``, else the callable's ``.drafting``, else top-k."""
    return drafting or getattr(sampler, "drafting", None) or DRAFTING_SCHEMES[-1]


def _token_processing(args, sampler):
    """The sample command's declared processing: the callable's ``.processing`` (else the defaults), with
    ``--inputs``, ``--order``, ``--ties`` and ``--indices`` replacing what they name; a bad combination is a
    usage error naming it."""
    from ..exact import TokenProcessing

    base = getattr(sampler, "processing", None)
    base = base if isinstance(base, TokenProcessing) else TokenProcessing()
    ties = dict(base.ties)
    if args.ties is not None:
        ties.update(top_k=args.ties, top_p=args.ties)
        if args.ties != "keep":
            ties["greedy"] = args.ties
    try:
        return TokenProcessing(inputs=args.inputs or base.inputs, order=args.order or base.order, ties=ties,
                               indices=bool(args.indices or base.indices))
    except ValueError as exc:
        raise UsageError(f"the declared processing: {exc}") from None


def _scenarios(path, names, command, args_drafting=None, processing=None):
    """The scenarios to run: from ``--scenarios`` (or the default battery), filtered by ``--scenario``."""
    if path is None and not names:
        return None
    if path is None:
        from .. import scenarios as bundled

        if command == "tree":
            found = tuple(bundled.default_tree_battery(_tree_drafting(args_drafting)))
        elif command == "ragged":
            found = tuple(bundled.default_ragged_battery())
        elif command == "sample":
            found = tuple(bundled.default_token_battery(processing))
        else:
            found = tuple(bundled.default_verifier_battery() if command == "verify"
                          else bundled.default_generator_battery())
    else:
        obj = resolve_callable(path, what="scenario list")
        what = "it"
        if callable(obj):
            try:
                obj = obj()
            except Exception as exc:  # not a scenario factory (a sampler, a function needing arguments)
                detail = " ".join(str(exc).split()) or "no message"
                raise UsageError(f"--scenarios {path!r}: calling it with no arguments raised {type(exc).__name__}: "
                                 f"{detail}; give a list of scenarios, or a callable that takes no arguments and "
                                 "returns one") from None
            what = "calling it"
        try:
            found = tuple(obj)
        except TypeError:
            raise UsageError(f"--scenarios {path!r} is neither a scenario list nor a callable returning one "
                             f"({what} gave a {type(obj).__name__})") from None
    if names:
        known = [getattr(s, "name", None) for s in found]
        unknown = [n for n in names if n not in known]
        if unknown:
            raise UsageError(f"unknown scenario(s) {', '.join(map(repr, unknown))}; choose from {', '.join(known)}")
        found = tuple(s for s in found if s.name in names)
    return found


def run_check(args) -> int:
    """verify / generate: the check runs in a child process (:func:`_check_in_child`); the report is
    written, then printed (:func:`_publish`); the status is the verdict received, never stdout's fate."""
    from .._isolation import supervise_check

    path = args.callable or default_sampler(KIND_OF[args.command], args.backend)
    folder, identity = _report_folder(args, path)  # a bad --report is a usage error before anything runs
    options = {"mode": args.mode, "tv": _target_tv(args), "seed": args.seed, "alpha": args.alpha if args.alpha != DEFAULT_ALPHA else None,
               "scenarios": args.scenarios, "backend": args.backend, "device": args.device, "dtype": args.dtype,
               "checks": args.checks, "strict": args.strict or None,
               "rule": getattr(args, "rule", DEFAULT_RULE) if getattr(args, "rule", DEFAULT_RULE) != DEFAULT_RULE else None,
               "timeout": args.timeout if args.timeout != DEFAULT_TIMEOUT_S else None}
    output = OutputFile()  # the sampler's own stdout / stderr, kept out of the verdict (see _capture)
    quiet = bool(getattr(args, "quiet", False))
    try:
        return supervise_check(functools.partial(_check_in_child, args, path, output_path=output.path),
                               command=args.command, path=path, options=options,
                               fallback_header=_command_line_header(args, path),
                               publish=functools.partial(_publish, args, folder, identity, output=output),
                               usage_error=UsageError,
                               progress=make_progress(not (args.no_progress or quiet), desc=args.command),
                               call_timeout=args.timeout,
                               heartbeat_s=math.inf if quiet else None)  # -q: the verdict line, nothing else
    finally:
        output.remove()


def _command_line_header(args, path) -> dict:
    """The report's run metadata as the command line gives it: the header of a report whose run ended
    before the checker planned it (the sampler's module exited on import); unknowns are None/empty."""
    return {"kind": KIND_OF[args.command], "sampler": path, "mode": args.mode,
            "backend": args.backend, "device": args.device, "dtype": args.dtype or "", "tolerance": None,
            "seed": args.seed, "alpha": args.alpha, "alpha_per_check": args.alpha, "design_tv": None,
            "checks": list(args.checks or ()), "strict": bool(args.strict)}


def _check_in_child(args, path, channel, output_path=None):
    """The child's side of :func:`_run_check`: import the sampler and scenarios, run the check under a
    monitor that reports to the parent, its stdout and stderr sent to ``output_path``; return ``("report",
    data)``, ``("usage", message)``, ``("sampler", facts)`` or ``("internal", facts)``."""
    from .._isolation import ChannelMonitor

    if output_path is not None:
        redirect_output_to(output_path)

    kind = KIND_OF[args.command]
    try:
        foreign = path.startswith(FOREIGN)
        processing = _token_processing(args, None) if args.command == "sample" and foreign else None
        sampler = _resolve_sampler(path, kind, processing)
        drafting = _tree_drafting(args.drafting, sampler) if args.command == "tree" else None
        if args.command == "sample" and not foreign:
            processing = _token_processing(args, sampler)
        scenarios = _scenarios(args.scenarios, args.scenario_names, args.command, drafting, processing)
    except UsageError as exc:
        return ("usage", str(exc))
    monitor = ChannelMonitor(channel)
    try:
        executor, client = _executor(args)
    except UsageError as exc:
        return ("usage", str(exc))
    try:
        return _checked_in_child(args, path, kind, sampler, scenarios, (drafting, processing), monitor, executor)
    finally:
        if client is not None:
            client.close()


def _checked_in_child(args, path, kind, sampler, scenarios, declared, monitor, executor):
    """The check itself, in the child, on ``executor`` (None: in the child's own process)."""
    from .._isolation import describe_exception
    from .._options import api_options
    from ..checker.core.options import FIELDS, check_options
    from ..checker.core.registry import kind_for
    from ..checker.core.session import run
    from ..checker.core.executors import ShardsLost

    try:
        drafting, processing = declared
        sampler_kind = kind_for(kind, drafting=drafting, processing=processing)
        if getattr(args, "target", None):  # generate on your own model pair: the target is the oracle
            from ..checker.model_loop.kind import model_loop_kind

            sampler_kind = model_loop_kind(_model(args.target, "--target-model"),
                                           _model(args.draft, "--draft-model") if args.draft else None)
        values = {o.name: getattr(args, o.name) for o in api_options(kind) if o.name in FIELDS and hasattr(args, o.name)}
        values.update(mode=_mode(args), progress=monitor.progress, name=path, monitor=monitor, executor=executor)
        options = check_options(sampler_kind, scenarios_source=args.scenarios, **values)
        sampler_kind.validate(options)
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


def _model(path: str, flag: str):
    """The model a ``MODULE:CALLABLE`` names: a model object (a torch module, anything with ``generate``) as it is,
    else the callable's result (a function that builds and returns the model)."""
    found = resolve_callable(path, what=f"model ({flag})", require_callable=False)
    if hasattr(found, "forward") or hasattr(found, "generate") or not callable(found):
        return found
    try:
        return found()
    except Exception as exc:  # noqa: BLE001 - not a model builder: a usage error naming it
        raise ValueError(f"{flag} {path!r}: calling it raised {type(exc).__name__}: {exc}") from None


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


def _publish(args, folder, identity, data, output=None):
    """Write the report files, then print the verdict and where they are (stdout may be gone by now); the
    sampler's own output (``output``, an :class:`OutputFile`) goes into the report as an excerpt."""
    written = {}
    captured = output.excerpt() if output is not None else None
    if captured is not None:
        data = {**data, "sampler_output": captured}
    if folder is not None:
        from ..report import ReportDirError, escaped, write_report

        try:
            written = write_report(data, folder, formats=args.formats, plots=not args.no_plots, force=args.force,
                                   run_identity=identity)
        except (ReportDirError, OSError) as exc:  # the folder changed during the run (another run took it)
            message = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageError(f"cannot write the report to {escaped(message)}") from None
    _emit(data, args)
    for fmt in REPORT_FORMATS:
        if fmt in written and not getattr(args, "quiet", False):  # -q: the verdict line, nothing else
            print(f"report: {written[fmt]}")


def _emit(data, args):
    if getattr(args, "quiet", False):
        print(f"{data.get('sampler')}: {str(data.get('verdict')).upper()}")
        return
    from ..report import render_text

    print(render_text(data))


