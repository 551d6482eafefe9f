"""cuda.core's `_utils.version`: the cuda.bindings and driver versions as (major, minor, patch)."""

from __future__ import annotations

import functools


def _parse_version_triple(version_str: str) -> tuple[int, int, int]:
    parts = [int("".join(c for c in p if c.isdigit()) or 0) for p in version_str.split(".")[:3]]
    return (*parts, 0, 0, 0)[:3]  # type: ignore[return-value]


@functools.cache
def binding_version() -> tuple[int, int, int]:
    """The cuda.bindings version."""
    from cuda import bindings

    return _parse_version_triple(bindings.__version__)


@functools.cache
def driver_version() -> tuple[int, int, int]:
    """The CUDA driver's version (cuDriverGetVersion), e.g. (13, 0, 0)."""
    from ironaccel_cuda import driver_version as query

    from .cuda_utils import guarded

    v = int(guarded(query))
    return (v // 1000, (v % 1000) // 10, 0)
