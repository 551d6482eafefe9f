"""Growable device memory on the driver's virtual memory management (cuMemAddressReserve / cuMemCreate / cuMemMap).

    kv = dev.reserve(64 << 30)           # VirtualBuffer: 64 GiB of address space, nothing mapped yet
    kv.resize(1 << 30)                   # map 1 GiB of physical memory at kv.ptr
    cache = kv.view("float16")           # a DeviceBuf over what is mapped
    kv.resize(2 << 30)                   # grow in place: kv.ptr is unchanged, nothing is copied

A `VirtualBuffer` reserves `capacity` bytes of device address space once and
maps physical memory into it on demand, in chunks of the device's allocation
granularity (typically 2 MiB): each `resize` that grows creates one physical
allocation for the new tail and maps it right after the last; the address
never changes and the data already there stays where it is.  Shrinking
releases the chunks that lie wholly past the new size (so shrinking by less
than the last grow keeps that chunk mapped; `mapped` says how much is).
Growing past `capacity` is an InvalidArgument.

`view(dtype)` gives a DeviceBuf over the current size that keeps the
VirtualBuffer alive; shrinking closes views that reach past the new size, and
`close()` closes them all.  Unmapping is synchronous: shrinking and closing
wait for all work on the device first (cuCtxSynchronize), so no kernel can
still be using what is unmapped.  `grant_access(peer)` maps the memory for
another device too, now and for every later chunk.

`VirtualAllocator(dev)` is the same memory behind the allocator protocol: each
`allocate` reserves and maps exactly what it returns, and freeing unmaps it.
"""

from __future__ import annotations

import sys
import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Any

from . import _driver
from . import dtypes as _dtypes
from ._devices import open_device
from ._driver import call, driver
from .allocator import _Tracked, check_stream, deallocate, element_count
from .driver_pool import _ACCESS, _access_desc, device_attribute, peer_device
from .errors import Unsupported, closed, invalid
from .memory import adopt

if TYPE_CHECKING:
    from .device import Device
    from .stream import Stream

    DeviceBuf = Any  # memory.DeviceBuf is made at run time, so it cannot be a static type

__all__ = ["VirtualBuffer", "VirtualAllocator"]

def _round_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


class VirtualBuffer:
    """Reserved device address space with physical memory mapped on demand; see the module docstring."""

    device: Device
    capacity: int
    granularity: int
    nbytes: int
    _base: Any
    _ptr: int
    _prop: Any
    _chunks: list[tuple[int, int, Any]]  # (offset, bytes, physical handle), in address order
    _access: dict[int, int]  # device ordinal -> CUmemAccess_flags
    _views: list[weakref.ref[Any]]
    _lock: threading.Lock
    _closed: bool

    def __init__(self) -> None:
        raise TypeError("use Device.reserve(capacity)")

    @classmethod
    def _create(cls, device: Device, capacity: int, *, exportable: bool = False, granularity: str = "minimum",
                gpu_direct_rdma: bool = False, self_access: str = "readwrite") -> VirtualBuffer:
        """Reserve `capacity` bytes; physical chunks are exportable as POSIX file descriptors when `exportable`,
        rounded to the device's "minimum" or "recommended" granularity, GPUDirect RDMA capable when asked, and
        mapped "readwrite" or "read" for `device`."""
        op = "cuMemAddressReserve"
        device._check_open(op)
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
            raise invalid(op, f"capacity must be a positive int (bytes), got {capacity!r}")
        if capacity > 1 << 48:
            raise invalid(op, f"capacity {capacity} is more than the 2**48 bytes of a GPU's address space")
        if granularity not in ("minimum", "recommended"):
            raise invalid(op, f"granularity must be 'minimum' or 'recommended', got {granularity!r}")
        if self_access not in ("readwrite", "read"):
            raise invalid(op, f"self_access must be 'readwrite' or 'read', got {self_access!r}")
        for name, flag in (("exportable", exportable), ("gpu_direct_rdma", gpu_direct_rdma)):
            if not isinstance(flag, bool):
                raise invalid(op, f"{name} must be a bool, got {flag!r}")
        if not device_attribute(device, "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"):
            raise Unsupported("cuda", op, f"cuda:{device.ordinal} has no virtual memory management")
        if gpu_direct_rdma and not device_attribute(device, "GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED"):
            raise Unsupported("cuda", op, f"cuda:{device.ordinal} has no GPUDirect RDMA for VMM allocations")
        drv = driver()
        prop = drv.CUmemAllocationProp()
        prop.type = drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = device.ordinal
        if exportable:
            prop.requestedHandleTypes = drv.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        if gpu_direct_rdma:
            prop.allocFlags.gpuDirectRDMACapable = 1
        flags = drv.CUmemAllocationGranularity_flags
        device._bind_here()
        unit = int(call("cuMemGetAllocationGranularity", prop,
                        flags.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED if granularity == "recommended"
                        else flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM))
        capacity = _round_up(capacity, unit)
        base = call(op, capacity, unit, 0, 0)
        vb = cls.__new__(cls)
        vb.device = device
        vb.capacity = capacity
        vb.granularity = unit
        vb.nbytes = 0
        vb._base = base
        vb._ptr = int(base)
        vb._prop = prop
        vb._chunks = []
        vb._access = {device.ordinal: _ACCESS[self_access]}
        vb._views = []
        vb._lock = threading.Lock()
        vb._closed = False
        return vb

    # -- size -----------------------------------------------------------------

    @property
    def ptr(self) -> int:
        """The device address of the reservation: the same for the buffer's whole life."""
        if self._closed:
            raise closed("VirtualBuffer.ptr", "virtual buffer")
        return self._ptr

    @property
    def mapped(self) -> int:
        """Bytes of physical memory mapped (a multiple of `granularity`, at least `nbytes`)."""
        return self._chunks[-1][0] + self._chunks[-1][1] if self._chunks else 0

    def resize(self, nbytes: int) -> None:
        """Grow or shrink to `nbytes` bytes in place (the address stays; data below the new size stays)."""
        op = "VirtualBuffer.resize"
        if self._closed:
            raise closed(op, "virtual buffer")
        self.device._check_open(op)
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise invalid(op, f"nbytes must be a non-negative int, got {nbytes!r}")
        if nbytes > self.capacity:
            raise invalid(op, f"cannot grow to {nbytes} bytes: the reservation holds {self.capacity} "
                          f"(reserve more with Device.reserve)")
        with self._lock:
            target = _round_up(nbytes, self.granularity)
            if target > self.mapped:
                self._map(self.mapped, target - self.mapped)
            elif nbytes < self.nbytes:
                self._close_views(beyond=nbytes)
                self._unmap_from(target)
            self.nbytes = nbytes

    def _map(self, offset: int, size: int) -> None:
        self.device._bind_here()
        handle = call("cuMemCreate", size, self._prop, 0)
        at = self._ptr + offset
        try:
            call("cuMemMap", at, size, 0, handle, 0)
            try:
                call("cuMemSetAccess", at, size, self._descs(), len(self._access))
            except BaseException:
                call("cuMemUnmap", at, size)
                raise
        except BaseException:
            call("cuMemRelease", handle)
            raise
        self._chunks.append((offset, size, handle))

    def _unmap_from(self, offset: int) -> None:
        """Unmap and release every chunk that starts at or past `offset` (after the device is idle)."""
        doomed = [c for c in self._chunks if c[0] >= offset]
        if not doomed:
            return
        if not _driver.forked:
            self.device._bind_here()
            call("cuCtxSynchronize")
        while self._chunks and self._chunks[-1][0] >= offset:
            start, size, handle = self._chunks.pop()
            if not _driver.forked:
                call("cuMemUnmap", self._ptr + start, size)
                call("cuMemRelease", handle)

    def _descs(self) -> list[Any]:
        drv = driver()
        return [_access_desc(drv, ordinal, flags) for ordinal, flags in self._access.items()]

    # -- views and peers --------------------------------------------------------

    def view(self, dtype: Any = "uint8", stream: Stream | None = None) -> DeviceBuf:
        """A DeviceBuf over the current `nbytes` as `dtype` (home stream `stream`); it keeps this buffer alive."""

        op = "VirtualBuffer.view"
        if self._closed:
            raise closed(op, "virtual buffer")
        dt, _, itemsize = _dtypes.spec(dtype, op)
        if self.nbytes == 0:
            raise invalid(op, "nothing is mapped yet (resize first)")
        if self.nbytes % itemsize:
            raise invalid(op, f"{self.nbytes} bytes is not a whole number of {dt.value} elements")
        s = check_stream(self.device, stream, op, same_device=True)
        buf = adopt(self._ptr, self.nbytes // itemsize, dt, self.device, stream=s, keepalive=self)
        with self._lock:
            self._views = [r for r in self._views if r() is not None]
            self._views.append(weakref.ref(buf))
        return buf

    def _close_views(self, beyond: int = 0) -> None:
        keep = []
        for ref in self._views:
            view = ref()
            if view is None or view.ptr is None:
                continue
            if view.ptr + view.nbytes > self._ptr + beyond:
                view.close()
            else:
                keep.append(ref)
        self._views = keep

    def grant_access(self, peer: Device | int, access: str = "readwrite") -> None:
        """Let device `peer` use this memory ("read", "readwrite" or "none"), now and after every grow."""
        op = "cuMemSetAccess"
        if self._closed:
            raise closed(op, "virtual buffer")
        if not isinstance(access, str) or access not in _ACCESS:
            raise invalid(op, f"access must be one of {sorted(_ACCESS)}, got {access!r}")
        other = peer_device(peer, op)
        if other.ordinal == self.device.ordinal:
            if access != "readwrite":
                raise invalid(op, f"memory of cuda:{other.ordinal} is always read-write for that device")
            return
        if not other.can_access(self.device._state):
            raise invalid(op, f"cuda:{other.ordinal} cannot access cuda:{self.device.ordinal} (no peer path)")
        with self._lock:
            if access == "none":
                self._access.pop(other.ordinal, None)
            else:
                self._access[other.ordinal] = _ACCESS[access]
            desc = _access_desc(driver(), other.ordinal, _ACCESS[access])
            for start, size, _ in self._chunks:
                call(op, self._ptr + start, size, [desc], 1)

    # -- lifetime -------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether `close()` released the reservation and everything mapped into it."""
        return self._closed

    def close(self) -> None:
        """Close the views, unmap and release everything, free the reservation.  Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._close_views()
            self._unmap_from(0)
            if not _driver.forked:
                call("cuMemAddressFree", self._base, self.capacity)

    def __enter__(self) -> VirtualBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            try:
                self.close()
            except Exception as exc:  # said, not swallowed: what was mapped may be left behind
                if not sys.is_finalizing():
                    warnings.warn(f"VirtualBuffer: freeing it on collection failed: {exc}", RuntimeWarning,
                                  stacklevel=2)

    def __repr__(self) -> str:
        if self._closed:
            return f"<VirtualBuffer closed on cuda:{self.device.ordinal}>"
        return (f"<VirtualBuffer {hex(self._ptr)} {self.nbytes} of {self.capacity} bytes on "
                f"cuda:{self.device.ordinal}>")


class VirtualAllocator(_Tracked):
    """The allocator protocol over virtual memory: each buffer is its own reservation, mapped whole.

    Allocation and freeing are synchronous (freeing waits for the device, as
    unmapping does); `stream` is only the buffer's home stream.
    """

    def __init__(self, device: Device):
        super().__init__()
        open_device(device, "VirtualAllocator")
        self.device = device

    def allocate(self, size: int, dtype: Any = "uint8", stream: Stream | None = None) -> DeviceBuf:
        """`size` elements of `dtype` in a reservation of their own, mapped whole before it returns."""
        op = "VirtualAllocator.allocate"
        self.device._check_open(op)
        dt, size, nbytes = element_count(self.device, size, dtype, op, self.device.total_memory)
        s = check_stream(self.device, stream, op, same_device=True)
        vb = VirtualBuffer._create(self.device, nbytes)
        try:
            vb.resize(nbytes)
        except BaseException:
            vb.close()
            raise
        self._add(vb._ptr, nbytes)
        return adopt(vb._ptr, size, dt, self.device, stream=s, release=_VirtualFree(self, vb))

    def deallocate(self, buf: DeviceBuf, stream: Stream | None = None) -> None:
        """Unmap and release `buf` after the work queued on `stream` (default: its home stream)."""
        deallocate(self, buf, stream, "VirtualAllocator.deallocate", owned=self._owns(buf))

    def __repr__(self) -> str:
        return f"<VirtualAllocator for cuda:{self.device.ordinal}>"


class _VirtualFree:
    __slots__ = ("owner", "vb")

    def __init__(self, owner: VirtualAllocator, vb: VirtualBuffer):
        self.owner, self.vb = owner, vb

    def __call__(self) -> None:
        self.owner._drop(self.vb._ptr)
        self.vb.close()
