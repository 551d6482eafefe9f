"""cuda.core's `GraphMemoryResource`: stream-ordered allocation inside graph capture (graph memory nodes).

`allocate(size, stream=graph_builder)` is cuMemAllocAsync on the capturing stream, which the
driver records as a memory-allocation node of the graph; `Buffer.close()` during the capture
records the free node, and a free on an ordinary stream after a launch gives the memory back.
Outside capture both raise, as in cuda.core.  One resource per device; its `attributes` are
the device's graph-memory counters (cuDeviceGetGraphMemAttribute) and `trim()` returns
unused graph memory to the OS (cuDeviceGraphMemTrim).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ironaccel_cuda import alloc_async, free_async

from .._utils.cuda_utils import call, driver, guarded
from ._buffer import Buffer, MemoryResource

__all__ = ["GraphMemoryResource"]


def _device(device_id: int) -> Any:
    from .._device import Device

    return Device(device_id)


class GraphMemoryResourceAttributes:
    """The device's graph-memory counters in bytes; the two high-water marks can be reset by setting them to 0."""

    __slots__ = ("_device_id",)
    _device_id: int
    _READ_ONLY = ("reserved_mem_current", "used_mem_current")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("GraphMemoryResourceAttributes cannot be instantiated directly. Please use MemoryResource "
                           "APIs.")

    @classmethod
    def _init(cls, device_id: int) -> GraphMemoryResourceAttributes:
        self = object.__new__(cls)
        object.__setattr__(self, "_device_id", device_id)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._READ_ONLY:
            raise AttributeError(f"attribute '{name}' of '{type(self).__qualname__}' objects is not writable")
        object.__setattr__(self, name, value)

    def _get(self, name: str) -> int:
        return int(guarded(_device(self._device_id).graph_memory, name.lower()))

    def _reset(self, name: str, value: int) -> None:
        if value != 0:
            raise AttributeError(f"Attribute '{name.lower()}' may only be set to zero (got {value}).")
        guarded(_device(self._device_id).reset_graph_memory_high, name.lower())

    @property
    def reserved_mem_current(self) -> int:
        """Current amount of backing memory allocated."""
        return self._get("RESERVED_MEM_CURRENT")

    @property
    def reserved_mem_high(self) -> int:
        """High watermark of backing memory allocated; set it to 0 to reset it to the current usage."""
        return self._get("RESERVED_MEM_HIGH")

    @reserved_mem_high.setter
    def reserved_mem_high(self, value: int) -> None:
        self._reset("RESERVED_MEM_HIGH", value)

    @property
    def used_mem_current(self) -> int:
        """Current amount of memory in use."""
        return self._get("USED_MEM_CURRENT")

    @property
    def used_mem_high(self) -> int:
        """High watermark of memory in use; set it to 0 to reset it to the current usage."""
        return self._get("USED_MEM_HIGH")

    @used_mem_high.setter
    def used_mem_high(self, value: int) -> None:
        self._reset("USED_MEM_HIGH", value)

    def __repr__(self) -> str:
        names = ("reserved_mem_current", "reserved_mem_high", "used_mem_current", "used_mem_high")
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)}' for n in names)})"


def _capturing_stream(stream: Any) -> Any:
    from .._stream import Stream_accept

    s = Stream_accept(stream)
    if not guarded(lambda: s.is_capturing):
        raise RuntimeError("GraphMemoryResource cannot perform memory operations on a non-capturing stream.")
    return s


class GraphMemoryResource(MemoryResource):
    """Memory of graphs being built: allocate only on a capturing stream or a GraphBuilder (one per device)."""

    __slots__ = ("_device_id",)
    _device_id: int

    def __new__(cls, device_id: Any) -> GraphMemoryResource:
        return cls._create(int(getattr(device_id, "device_id", device_id)))

    def __init__(self, device_id: Any) -> None:
        """Nothing to do: `__new__` returns the device's one resource."""

    @classmethod
    @cache
    def _create(cls, device_id: int) -> GraphMemoryResource:
        from .._device import Device

        self = object.__new__(cls)
        self._device_id = Device(device_id).ordinal
        return self

    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        """`size` bytes recorded as an allocation node of the graph `stream` is capturing."""
        s = _capturing_stream(stream)
        ptr = guarded(alloc_async, size, s) if size else 0
        return Buffer._init(ptr, size, self, stream=s)

    def deallocate(self, ptr: Any, size: int, *, stream: Any = None) -> None:
        """Free graph memory at `ptr` on `stream` (a free node when it is capturing)."""
        from .._stream import Stream_accept

        s = Stream_accept(stream)
        if int(ptr):
            guarded(free_async, int(ptr), s)

    def close(self) -> None:
        """No operation (as in cuda.core)."""

    def trim(self) -> None:
        """Give graph memory cached on the device and not in use back to the OS."""
        guarded(_device(self._device_id).trim_graph_memory)

    @property
    def attributes(self) -> GraphMemoryResourceAttributes:
        return GraphMemoryResourceAttributes._init(self._device_id)

    @property
    def device_id(self) -> int:
        return self._device_id

    @property
    def is_device_accessible(self) -> bool:
        return True

    @property
    def is_host_accessible(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<GraphMemoryResource device={self._device_id}>"
