"""Shared helpers for ``benchmarks/run.py``: machine header, timing, memory, Markdown tables."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
import tracemalloc

import numpy as np

from specdec_check.scenarios import VerifierScenario

__all__ = [
    "TimedScenario",
    "fmt_bytes",
    "fmt_int",
    "fmt_rate",
    "fmt_s",
    "interleaved_best",
    "loglog_slope",
    "machine_lines",
    "peak_rss_in_child",
    "table",
    "timed_verifier",
    "traced_peak",
]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_lines(torch_module) -> list:
    """Platform, CPU, Python, numpy and torch versions, as Markdown bullet lines."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count()
    torch_text = "absent (torch rows skipped)"
    if torch_module is not None:
        torch_text = f"{torch_module.__version__} ({torch_module.get_num_threads()} CPU threads)"
    try:
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "n/a"
    return [
        f"- platform: {platform.platform()}",
        f"- CPU: {_cpu_model()}; {cpus} usable CPU(s) of {os.cpu_count()}; load average at start {load}",
        f"- python {platform.python_version()} ({platform.python_implementation()}), numpy {np.__version__}, torch {torch_text}",
        f"- command: `{' '.join([os.path.relpath(sys.argv[0])] + sys.argv[1:])}`; started {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
    ]


def interleaved_best(fns: dict, repeats: int, sync=None) -> dict:
    """Best wall time of each callable over ``repeats`` rounds, the callables interleaved in each round.

    Interleaving puts every method through the same moments of a shared machine's load, so the
    ratios of best times are steadier than the absolute times. One untimed warm-up call each.
    Returns ``{name: (best_seconds, last_result)}``.
    """
    results = {name: (float("inf"), fn()) for name, fn in fns.items()}  # warm-up
    for _ in range(repeats):
        for name, fn in fns.items():
            if sync is not None:
                sync()
            start = time.perf_counter()
            out = fn()
            if sync is not None:
                sync()
            elapsed = time.perf_counter() - start
            best, _ = results[name]
            results[name] = (min(best, elapsed), out)
    return results


_CHILD_PRELUDE = """
import json, time
_state = {}
def _status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
def mark():
    _state["before"] = _status("VmRSS")
    try:  # reset the high-water mark to the current resident set (Linux >= 4.0)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        _state["reset"] = True
    except OSError:
        _state["reset"] = False
    _state["start"] = time.perf_counter()
def done(**fields):
    fields.update(elapsed=time.perf_counter() - _state["start"], before_bytes=_state["before"],
                  peak_bytes=_status("VmHWM"), reset=_state["reset"])
    print("RESULT " + json.dumps(fields))
"""


def peak_rss_in_child(script: str) -> dict:
    """Run ``script`` in a fresh interpreter and return what it reports with ``done(**fields)``,
    plus ``before_bytes`` (resident set when it calls ``mark()``), ``peak_bytes`` (the resident
    high-water mark from then to ``done``, VmHWM after a reset through /proc/self/clear_refs;
    ``reset`` is False when the reset failed and the mark covers the whole process) and
    ``elapsed`` seconds. Linux only (``/proc``); ``ru_maxrss`` would not do: Linux carries it over
    from the parent across fork and exec."""
    proc = subprocess.run([sys.executable, "-c", _CHILD_PRELUDE + script], capture_output=True, text=True,
                          check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"the child benchmark failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def traced_peak(fn):
    """Run ``fn()`` under tracemalloc; return (result, seconds, peak bytes allocated during the call)."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    try:
        out = fn()
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return out, elapsed, peak


def timed_verifier(verify, timer=time.perf_counter):
    """Wrap a verifier so the time spent inside it (``timer``: wall time unless told) and the calls and rows
    handed to it are recorded."""
    clock = {"s": 0.0, "calls": 0, "rows": 0}

    def timed(*, draft_token_ids, draft_probs, target_probs, generator):
        clock["calls"] += 1
        clock["rows"] += int(np.shape(draft_token_ids)[0])  # rows handed over, counted even if the call raises
        start = timer()
        try:
            return verify(draft_token_ids=draft_token_ids, draft_probs=draft_probs, target_probs=target_probs,
                          generator=generator)
        finally:
            clock["s"] += timer() - start

    timed.__name__ = timed.__qualname__ = f"timed_{getattr(verify, '__name__', 'verify')}"
    return timed, clock


class TimedScenario(VerifierScenario):
    """A VerifierScenario that records in ``draw_s`` the time the checker spends drawing its inputs (``clock``:
    wall time; a subclass may count CPU time instead)."""

    clock = staticmethod(time.perf_counter)

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "draw_s", 0.0)

    def draw(self, rng, law_rows=None, **kwargs):
        start = self.clock()
        out = super().draw(rng, law_rows, **kwargs)
        object.__setattr__(self, "draw_s", self.draw_s + self.clock() - start)
        return out


def loglog_slope(xs, ys) -> float:
    """Least-squares slope of log(y) against log(x): time ~ x**slope."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    ok = (xs > 0) & (ys > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(xs[ok]), np.log(ys[ok]), 1)[0])


def table(header, rows, align=None) -> list:
    """A Markdown table as a list of lines; ``align`` is a string of 'l'/'r' per column."""
    align = align or "l" + "r" * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def fmt_s(seconds) -> str:
    if seconds is None or not np.isfinite(seconds):
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def fmt_rate(x) -> str:
    if x is None or not np.isfinite(x):
        return "-"
    return f"{x:.3g}".replace("e+0", "e").replace("e+", "e")


def fmt_int(n) -> str:
    return "-" if n is None else f"{int(n):,}"


def fmt_bytes(n) -> str:
    if n is None:
        return "-"
    if n < 1024**2:
        return f"{n / 1024:.0f} KiB"
    if n < 1024**3:
        return f"{n / 1024**2:.1f} MiB"
    return f"{n / 1024**3:.2f} GiB"
