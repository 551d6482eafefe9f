"""cuda.core's location records for managed-memory operations: `Device` / `Host` / None to a (kind, id) spec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__: list[str] = []

_KINDS = ("device", "host", "host_numa", "host_numa_current")


@dataclass(frozen=True)
class _LocSpec:
    """A location: `kind` ("device", "host", "host_numa" or "host_numa_current") and its `id`."""

    kind: str
    id: int = 0


def _coerce_location(value: Any, *, allow_none: bool = False) -> _LocSpec | None:
    """`value` (a Device, a Host, a _LocSpec or None) as a _LocSpec; None only when `allow_none`."""
    from .._device import Device
    from .._host import Host

    if isinstance(value, _LocSpec):
        return value
    if isinstance(value, Device):
        return _LocSpec("device", value.device_id)
    if isinstance(value, Host):
        if value.is_numa_current:
            return _LocSpec("host_numa_current")
        if value.numa_id is not None:
            return _LocSpec("host_numa", value.numa_id)
        return _LocSpec("host")
    if value is None:
        if allow_none:
            return None
        raise ValueError("location is required")
    raise TypeError(f"location must be a Device, Host, or None; got {type(value).__name__}")


def _to_driver(spec: _LocSpec) -> Any:
    """The CUmemLocation of `spec` (ironaccel's `memory_location`)."""
    from ironaccel_cuda.driver_pool import memory_location

    from .._utils.cuda_utils import driver

    return memory_location(driver, spec.kind, spec.id)
