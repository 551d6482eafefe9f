"""Facts about the machine and software a run records: date, device, driver, versions of every peer."""

from __future__ import annotations

import datetime as _dt
import platform
import subprocess
from importlib import metadata

DISTRIBUTIONS = ("ironaccel-cuda", "ironaccel-core", "cuda-bindings", "cuda-core", "cupy-cuda13x", "cupy-cuda12x",
                 "torch", "numpy", "nvidia-cuda-nvrtc", "matplotlib")


def installed_versions() -> dict[str, str]:
    """Installed distribution versions (those present); the sides add what they report at open()."""
    found = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def nvidia_smi_driver() -> str:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else "?"


def run_facts() -> dict[str, object]:
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "host": platform.node(),
        "platform": platform.platform(),
        "driver_version": nvidia_smi_driver(),
        "distributions": installed_versions(),
    }
