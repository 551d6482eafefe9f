"""cuda.core's `ManagedMemoryResource`: managed memory from a managed memory pool (ironaccel `DriverPool`).

Without options it uses the driver's current managed pool (no preferred
location); with options it creates a pool of its own
(`DriverPool.create(dev, "managed", location=...)`) with the preferred location
the options name.  `allocate` gives `ManagedBuffer`s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ironaccel_cuda.driver_pool import DriverPool

from .. import _ia
from .._utils.cuda_utils import check_or_create_options, from_ironaccel
from ._managed_buffer import ManagedBuffer
from ._memory_pool import _MemPool

__all__ = ["ManagedMemoryResource", "ManagedMemoryResourceOptions"]

_TYPES = ("device", "host", "host_numa")


@dataclass
class ManagedMemoryResourceOptions:
    """The pool's preferred location: `preferred_location` read as `preferred_location_type` says.

    With no type: a device ordinal, -1 for the host, or None for no preference.
    """

    preferred_location: int | None = None
    preferred_location_type: Any = None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _preferred(opts: ManagedMemoryResourceOptions) -> tuple[str, int | None] | None:
    """("device", ordinal), ("host", None), ("host_numa", node) or None, validated as cuda.core does."""
    loc: Any = opts.preferred_location
    kind = opts.preferred_location_type
    if kind is None:
        if loc is None:
            return None
        if _is_int(loc) and loc == -1:
            return ("host", None)
        if _is_int(loc) and loc >= 0:
            return ("device", loc)
        raise ValueError(f"preferred_location must be a device ordinal (>= 0), -1 for the host, or None; got {loc!r}")
    kind = str(getattr(kind, "value", kind))
    if kind not in _TYPES:
        raise ValueError(f"{kind!r} is not a valid ManagedMemoryLocationType. Must be one of {list(_TYPES)}")
    if kind == "device":
        if not _is_int(loc) or loc < 0:
            raise ValueError(f"preferred_location must be a device ordinal (>= 0) for type 'device', got {loc!r}")
        return ("device", loc)
    if kind == "host":
        if loc is not None:
            raise ValueError(f"preferred_location must be None for type 'host', got {loc!r}")
        return ("host", None)
    if loc is None:
        from .. import _device

        numa = int(_device.Device().properties.host_numa_id)
        if numa < 0:
            raise RuntimeError("Cannot determine host NUMA ID: the current device reports none; pass "
                               "preferred_location=<NUMA node>")
        return ("host_numa", numa)
    if not _is_int(loc) or loc < 0:
        raise ValueError(f"preferred_location must be a NUMA node ID (>= 0) for type 'host_numa', got {loc!r}")
    return ("host_numa", loc)


class ManagedMemoryResource(_MemPool):
    """Stream-ordered managed memory, usable from the host and every device."""

    __slots__ = ("_preferred",)
    _buffer_class = ManagedBuffer

    def __init__(self, options: Any = None) -> None:
        from .. import _device

        opts = check_or_create_options(ManagedMemoryResourceOptions, options, "ManagedMemoryResource options",
                                       keep_none=True)
        preferred = _preferred(opts) if opts is not None else None
        dev = _device.Device(preferred[1]) if preferred is not None and preferred[0] == "device" else _device.Device()
        try:
            if opts is None:
                dpool = DriverPool.current(dev, "managed")
            else:
                where = None if preferred is None else (preferred[0], preferred[1] or 0)
                dpool = DriverPool.create(dev, "managed", location=where)
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        self._bind_pool(dev, dpool, owned=opts is not None)
        self._preferred = preferred

    def allocate(self, size: int, *, stream: Any = None) -> ManagedBuffer:
        """`size` bytes of managed memory, stream-ordered on `stream`: a ManagedBuffer."""
        return _MemPool.allocate(self, size, stream=stream)  # type: ignore[return-value]

    @property
    def device_id(self) -> int:
        """The preferred device's ordinal, or -1 when the preferred location is not a device."""
        p = self._preferred
        return p[1] if p is not None and p[0] == "device" else -1  # type: ignore[return-value]

    @property
    def preferred_location(self) -> tuple[str, int | None] | None:
        return self._preferred

    @property
    def is_device_accessible(self) -> bool:
        return True

    @property
    def is_host_accessible(self) -> bool:
        return True

    @property
    def is_managed(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<ManagedMemoryResource preferred_location={self._preferred}>"
