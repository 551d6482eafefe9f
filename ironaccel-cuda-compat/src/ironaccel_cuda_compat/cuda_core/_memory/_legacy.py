"""cuda.core's `LegacyPinnedMemoryResource` (ironaccel `PinnedBuf`) and `_SynchronousMemoryResource` (cuMemAlloc).

Pinned memory here is ironaccel's portable page-locked allocation (cuMemHostAlloc
with CU_MEMHOSTALLOC_PORTABLE; cuda.core uses cuMemAllocHost): usable from every
context, and known to ironaccel's copy paths as pinned.
"""

from __future__ import annotations

from typing import Any

from ironaccel_cuda import device_alloc, device_free, host_free

from .. import _ia
from .._utils.cuda_utils import call, driver, from_ironaccel, guarded
from ._buffer import Buffer, MemoryResource

__all__ = ["LegacyPinnedMemoryResource"]


class LegacyPinnedMemoryResource(MemoryResource):
    """Page-locked host memory, synchronous to allocate and free (the stream is only validated)."""

    __slots__ = ()

    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        from .._device import Device
        from .._stream import Stream_accept

        if stream is not None:
            Stream_accept(stream)
        if not size:
            return Buffer._init(0, 0, self)
        try:
            mem = _ia.IaDevice.alloc_pinned(Device(), size)
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        return Buffer._adopt(mem, size, self, None)

    def deallocate(self, ptr: Any, size: int, *, stream: Any = None) -> None:
        from .._stream import Stream_accept

        if stream is not None:
            Stream_accept(stream).sync()
        if size:
            guarded(host_free, int(ptr))

    @property
    def is_device_accessible(self) -> bool:
        return True

    @property
    def is_host_accessible(self) -> bool:
        return True

    @property
    def device_id(self) -> int:
        raise RuntimeError("a pinned memory resource is not bound to any GPU")


class _SynchronousMemoryResource(MemoryResource):
    """Device memory from cuMemAlloc / cuMemFree (devices without memory pools)."""

    __slots__ = ("_device_id",)

    def __init__(self, device_id: Any) -> None:
        from .._device import Device

        self._device_id = Device(device_id).device_id

    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        from .._stream import Stream_accept

        if stream is not None:
            Stream_accept(stream)
        ptr = guarded(device_alloc, size) if size else 0
        return Buffer._init(ptr, size, self)

    def deallocate(self, ptr: Any, size: int, *, stream: Any = None) -> None:
        from .._stream import Stream_accept

        if stream is not None:
            Stream_accept(stream).sync()
        if size:
            guarded(device_free, int(ptr))

    @property
    def is_device_accessible(self) -> bool:
        return True

    @property
    def is_host_accessible(self) -> bool:
        return False

    @property
    def device_id(self) -> int:
        return self._device_id
