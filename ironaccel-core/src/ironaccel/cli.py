"""The `ironaccel` command: a survey of every installed backend.

    ironaccel                 every selected backend: distribution, status, reason, devices
    ironaccel cuda vulkan     only these backends (others are not probed)
    ironaccel --json          the same as JSON, for machines
    ironaccel --failures      also plugin failures (import, hook, contract, probe)
    ironaccel --version       core's version, its plugin API, and each installed backend distribution's version

Exit status: 1 when a backend that was asked for by name (on the command line,
or by IRONACCEL_BACKENDS when none is given there) is unavailable, else 0; a
plain survey of every installed backend is not an error however many are
unusable.  A reader that stops early (``ironaccel | head -1``) ends the
command quietly.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from collections.abc import Sequence

from . import __version__
from .contract import PLUGIN_API
from .registry import ENV_BACKENDS, BackendRegistry, registry
from .types import BackendReport, DeviceDescriptor


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n else "-"


def _device_line(d: DeviceDescriptor) -> str:
    caps = ",".join(d.capabilities.names()) or "-"
    return (
        f"    [{d.ordinal}] {d.name}  ({d.kind.value}, {d.vendor.value}, "
        f"{d.compute_tier.name.lower()}, {_gib(d.memory_bytes)})  caps: {caps}"
    )


def _report_lines(r: BackendReport, listed: bool = True) -> list[str]:
    dist = f"{r.distribution} {r.version}" if r.distribution else "not installed"
    p = r.probe
    if p.available:
        versions = ", ".join(
            f"{k} {v}"
            for k, v in (("driver", p.driver_version), ("runtime", p.runtime_version), ("binding", p.binding_version))
            if v
        )
        count = f"{len(r.devices)} device(s)" if listed else "devices not listed (--no-devices)"
        head = f"{r.name:<10} {dist:<28} available    {count}"
        if versions:
            head += f"; {versions}"
        lines = [head]
        if p.library_path:
            lines.append(f"    library: {p.library_path}")
        lines.extend(_device_line(d) for d in r.devices)
        if r.error:
            lines.append(f"    enumeration failed: {r.error}")
        return lines
    lines = [f"{r.name:<10} {dist:<28} unavailable  {p.reason}"]
    if p.fix:
        lines.append(f"    fix: {p.fix}")
    return lines


def render(reports: Sequence[BackendReport], elapsed: float, reg: BackendRegistry, failures: bool,
           listed: bool = True) -> str:
    avail = sum(r.probe.available for r in reports)
    ndev = f"{sum(len(r.devices) for r in reports)} device(s)" if listed else "devices not listed"
    out = [
        f"ironaccel {__version__} on {platform.system()} {platform.machine()}, Python {platform.python_version()}: "
        f"{len(reports)} backend(s), {avail} available, {ndev} ({elapsed * 1000:.0f} ms)",
        "",
    ]
    for r in reports:
        out.extend(_report_lines(r, listed))
    if failures:
        problems = reg.failures()
        out.append("")
        out.append(f"plugin failures: {len(problems)}")
        out.extend(f"  {' '.join(p for p in (f.distribution, f.version) if p) or 'in-process'} [{f.stage}] "
                   f"{f.entry_point}: {f.error}" for f in problems)
    return "\n".join(out)


EPILOG = """exit status: 0 when every backend asked for by name is available, 1 when one is not.
Backends are asked for by name on the command line or, when none is given there, by
IRONACCEL_BACKENDS; a survey of every installed backend exits 0 however many are unavailable.
2 for a usage error.

environment: IRONACCEL_BACKENDS=cuda,vulkan (only these, in this order), IRONACCEL_DISABLE=pjrt,
IRONACCEL_PLUGINS=ironaccel-cuda (load only these distributions), IRONACCEL_PROBE_TIMEOUT=10
(seconds each probe may take; 0: no deadline)."""


def versions(reg: BackendRegistry) -> str:
    """Core's version and plugin API, then each installed backend distribution's version (`--version`)."""
    lines = [f"ironaccel {__version__} (plugin API {PLUGIN_API})"]
    seen: dict[str, list[str]] = {}
    for name in reg.installed():
        dist, version = reg.distribution(name)
        seen.setdefault(_who_dist(dist, version), []).append(name)
    for failure in reg.failures():
        if failure.stage in ("import", "register", "hook", "contract") and failure.distribution:
            seen.setdefault(_who_dist(failure.distribution, failure.version), [])
    for who, names in seen.items():
        lines.append(f"  {who}" + (f" ({', '.join(names)})" if names else " (failed to load: ironaccel --failures)"))
    return "\n".join(lines)


def _who_dist(dist: str | None, version: str | None) -> str:
    return " ".join(p for p in (dist or "in-process plugin", version) if p)


def main(argv: Sequence[str] | None = None, reg: BackendRegistry | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ironaccel", description="Survey ironaccel's accelerator backends.",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("backends", nargs="*", help="only these backends (default: every selected one)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--no-devices", action="store_true", help="probe only; do not enumerate devices")
    parser.add_argument("--failures", action="store_true", help="also list plugin failures")
    parser.add_argument("--version", action="store_true",
                        help="print core's version and each installed backend distribution's, and exit")
    args = parser.parse_args(argv)
    reg = reg or registry
    if args.version:
        return _write(versions(reg), 0)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:  # a typo in IRONACCEL_BACKENDS: said in the output
        warnings.simplefilter("always", RuntimeWarning)
        reports = reg.survey(args.backends or None, devices=not args.no_devices)
    notes = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)))
    elapsed = time.perf_counter() - start
    if args.json:
        doc = {
            "ironaccel": __version__,
            "plugin_api": PLUGIN_API,
            "python": platform.python_version(),
            "platform": f"{platform.system()} {platform.machine()}",
            "elapsed_s": round(elapsed, 4),
            "backends": [r.to_dict() for r in reports],
            "failures": [f.to_dict() for f in reg.failures()],
            "warnings": notes,
        }
        text = json.dumps(doc, indent=2)
    else:
        text = render(reports, elapsed, reg, args.failures or bool(reg.failures()), listed=not args.no_devices)
        text += "".join(f"\nwarning: {note}" for note in notes)
    named = bool(args.backends) or os.environ.get(ENV_BACKENDS) is not None
    return _write(text, 1 if named and not all(r.probe.available for r in reports) else 0)


def _write(text: str, status: int) -> int:
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`ironaccel | head -1`): say nothing more, and keep Python's exit-time
        # flush of stdout from reporting the same broken pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return status
