"""Profiling hooks: NVTX ranges and markers, and the driver's profiler start/stop.

    with cu.nvtx_range("step", color="blue"):     # shows as a range in Nsight Systems
        ...
    cu.nvtx_mark("checkpoint")
    cu.profiler_start(); ...; cu.profiler_stop()  # limit collection (nsys --capture-range=cudaProfilerApi)

NVTX goes through NVIDIA's `nvtx` package (pip install nvtx), which carries
the NVTX headers: with no profiler attached each call is a no-op costing a
few hundred nanoseconds, with one the tool's injection library receives
them.  Without the package, the NVTX calls raise `NotAvailable` saying so;
`profiler_start` / `profiler_stop` need only the driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from ._driver import call
from .errors import BACKEND, NotAvailable, invalid

__all__ = ["nvtx_range", "nvtx_mark", "nvtx_push", "nvtx_pop", "profiler_start", "profiler_stop"]

DOMAIN = "ironaccel"
_nvtx: ModuleType | None = None


def _module() -> ModuleType:
    global _nvtx
    if _nvtx is None:
        try:
            import nvtx
        except ImportError as exc:
            raise NotAvailable(BACKEND, f"the nvtx package is not installed ({exc})",
                               fix="pip install nvtx (NVIDIA's NVTX annotations for Python)") from exc
        _nvtx = nvtx
    return _nvtx


def _message(name: Any, op: str) -> str:
    if not isinstance(name, str) or not name or "\0" in name:
        raise invalid(op, f"an NVTX message is a non-empty str without NUL, got {name!r}")
    return name


def _domain(domain: Any, op: str) -> Any:
    if domain is not None and not isinstance(domain, str):
        raise invalid(op, f"an NVTX domain is a str (None: NVTX's global domain), got {domain!r}")
    return domain


def nvtx_push(name: str, color: str | None = None, domain: str = DOMAIN) -> None:
    """Open an NVTX range on this thread (nvtxDomainRangePushEx); close it with `nvtx_pop`."""
    op = "nvtxRangePush"
    _module().push_range(_message(name, op), color=color, domain=_domain(domain, op))


def nvtx_pop(domain: str = DOMAIN) -> None:
    """Close this thread's innermost NVTX range of `domain` (nvtxDomainRangePop)."""
    _module().pop_range(domain=_domain(domain, "nvtxRangePop"))


@contextmanager
def nvtx_range(name: str, color: str | None = None, domain: str = DOMAIN) -> Iterator[None]:
    """An NVTX range around a block of code."""
    nvtx_push(name, color, domain)
    try:
        yield
    finally:
        nvtx_pop(domain)


def nvtx_mark(name: str, color: str | None = None, domain: str = DOMAIN) -> None:
    """An instant NVTX marker (nvtxDomainMarkEx)."""
    op = "nvtxMark"
    _module().mark(_message(name, op), color=color, domain=_domain(domain, op))


def profiler_start() -> None:
    """Start profiler collection for this process (cuProfilerStart)."""

    call("cuProfilerStart")


def profiler_stop() -> None:
    """Stop profiler collection and flush what was collected (cuProfilerStop)."""

    call("cuProfilerStop")
