"""The one formatter of repro lines: the command that reruns a finding's scenario."""

from __future__ import annotations

__all__ = ["repro_command"]


def repro_command(command: str, sampler: str, options, scenario: str) -> str:
    """``specdec-check <command> <sampler> --mode M --seed S --scenario NAME`` (plus the backend's
    options when it is not numpy): the run of one scenario with the same seed and mode."""
    backend = options.backend
    line = f"specdec-check {command} {sampler} --mode {options.mode.name} --seed {options.seed} --scenario {scenario}"
    if backend.name != "numpy":
        line += f" --backend {backend.name} --device {backend.device} --dtype {backend.dtype}"
    return line
