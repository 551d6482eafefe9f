"""Managed (unified) memory: one address for the host and every device, migrated by the driver.

    managed = cu.ManagedAllocator(dev)
    buf = managed.allocate(1 << 20, "float32")      # a DeviceBuf (cuMemAllocManaged)
    cu.host_array(buf)[:] = 1.0                      # a numpy view of the same memory
    cu.advise(buf, "read_mostly")                    # or "preferred_location" / "accessed_by", with a location
    cu.prefetch(buf, dev, stream=s)                  # migrate ahead of use; cu.prefetch(buf, "host") back
    cu.attach(buf, s)                                # only stream s (and the host) may touch it now
    cu.managed_info(buf)                             # read_mostly, preferred location, last prefetch, accessed_by

Locations are a `Device` (or its ordinal) or `"host"`.  Prefetching, advice
and attach apply to the whole buffer (views: to the view's bytes; attach: to
the whole allocation).  Prefetch needs a device with concurrent managed
access (`dev.attributes.concurrent_managed_access`; Linux GPUs from Pascal on have it): others
raise Unsupported.  `ManagedAllocator.allocate` refuses more than the device
has free (`dev.memory_info()`): oversubscribing managed memory thrashes or
stalls the GPU.  Allocation is synchronous (memory is usable at once); freeing
waits for the buffer's home stream, then calls `cuMemFree`.

`host_array(buf)` is a numpy view of managed or host-pool memory (a
`DeviceBuf` from `ManagedAllocator` or from `dev.create_driver_pool(host=True)`),
no copy.  Synchronize before the host reads what kernels wrote.  The array
keeps the buffer alive, but closing the buffer frees the memory: do not use
the array afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _core, _driver
from ._devices import DeviceState, device_count, open_device, state_of
from ._driver import call, driver
from .allocator import _DirectFree, _Tracked, check_stream, deallocate, element_count, host_ranges, is_devicebuf
from .driver_pool import memory_location
from .errors import OutOfMemory, Unsupported, closed, invalid
from .memory import _HostArrayOwner, adopt
from .stream import Stream

if TYPE_CHECKING:
    from .device import Device

    DeviceBuf = Any  # memory.DeviceBuf is made at run time, so it cannot be a static type

__all__ = ["ManagedAllocator", "ManagedInfo", "prefetch", "advise", "attach", "host_array", "managed_info"]

CU_MEM_ATTACH_GLOBAL = 0x1
CU_MEM_ATTACH_HOST = 0x2
CU_MEM_ATTACH_SINGLE = 0x4
_ATTACH = {"global": CU_MEM_ATTACH_GLOBAL, "host": CU_MEM_ATTACH_HOST, "single": CU_MEM_ATTACH_SINGLE}
CU_DEVICE_CPU = -1
_ADVICE = {
    "read_mostly": "CU_MEM_ADVISE_SET_READ_MOSTLY",
    "unset_read_mostly": "CU_MEM_ADVISE_UNSET_READ_MOSTLY",
    "preferred_location": "CU_MEM_ADVISE_SET_PREFERRED_LOCATION",
    "unset_preferred_location": "CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION",
    "accessed_by": "CU_MEM_ADVISE_SET_ACCESSED_BY",
    "unset_accessed_by": "CU_MEM_ADVISE_UNSET_ACCESSED_BY",
}
_NEEDS_LOCATION = {"preferred_location", "accessed_by", "unset_accessed_by"}


@dataclass(frozen=True)
class ManagedInfo:
    """What the driver says of a managed range (cuMemRangeGetAttribute).

    Locations are a device ordinal, "host", or None (none, or not the same
    for every page of the range).
    """

    read_mostly: bool
    preferred_location: int | str | None
    last_prefetch_location: int | str | None
    accessed_by: tuple[int | str, ...]


class ManagedAllocator(_Tracked):
    """Managed memory behind the allocator protocol; see the module docstring.

    `host_first=True` allocates with CU_MEM_ATTACH_HOST (the memory starts
    attached to the host; use `attach` before device use on devices without
    concurrent managed access).
    """

    def __init__(self, device: Device, *, host_first: bool = False):
        super().__init__()

        op = "ManagedAllocator"
        open_device(device, op)
        if not isinstance(host_first, bool):
            raise invalid(op, f"host_first must be a bool, got {host_first!r}")
        if not device.attributes.managed_memory:
            raise Unsupported("cuda", "cuMemAllocManaged", f"cuda:{device.ordinal} has no managed memory")
        self.device = device
        self._flags = CU_MEM_ATTACH_HOST if host_first else CU_MEM_ATTACH_GLOBAL

    def allocate(self, size: int, dtype: Any = "uint8", stream: Stream | None = None) -> DeviceBuf:
        """`size` elements of `dtype` of managed memory (cuMemAllocManaged), addressable by host and device."""
        op = "cuMemAllocManaged"
        self.device._check_open(op)
        dt, size, nbytes = element_count(self.device, size, dtype, op)
        s = check_stream(self.device, stream, op)
        free = self.device.memory_info()[0]
        if nbytes > free:
            raise OutOfMemory("cuda", op, detail=f"{nbytes} bytes of managed memory is more than cuda:"
                              f"{self.device.ordinal} has free ({free}); oversubscribing managed memory can stall "
                              "the GPU")
        self.device._bind_here()
        ptr = int(call(op, nbytes, self._flags))
        self._add(ptr, nbytes)
        host_ranges.add(ptr, nbytes, "managed")
        return adopt(ptr, size, dt, self.device, stream=s, release=_ManagedFree(self, ptr, s))

    def deallocate(self, buf: DeviceBuf, stream: Stream | None = None) -> None:
        """Free `buf` (cuMemFree) after the work queued on `stream` (default: its home stream)."""
        deallocate(self, buf, stream, "ManagedAllocator.deallocate", owned=self._owns(buf))

    def __repr__(self) -> str:
        return f"<ManagedAllocator for cuda:{self.device.ordinal}>"


class _ManagedFree(_DirectFree):
    """cuMemFree after the home stream, as for DirectAllocator; the host stops addressing it first."""

    __slots__ = ()

    def __call__(self) -> None:
        host_ranges.remove(self.ptr)
        super().__call__()


# -- operations on managed buffers ------------------------------------------------


def _managed(buf: Any, op: str) -> tuple[int, int]:
    """(base, bytes) of the managed allocation holding `buf`; typed errors for anything else."""
    if not is_devicebuf(buf):
        raise invalid(op, f"expected a DeviceBuf of managed memory, got {type(buf).__name__}")
    if buf.ptr is None:
        raise closed(op, "buffer")
    found = host_ranges.find(buf.ptr, buf.nbytes)
    if found is not None and found[2] == "managed":
        return found[0], found[1]
    attr = driver().CUpointer_attribute.CU_POINTER_ATTRIBUTE_IS_MANAGED
    err, value = _driver.try_call("cuPointerGetAttribute", attr, buf.ptr)
    if err or not value:
        raise invalid(op, "the buffer is not managed memory (allocate it with ManagedAllocator)")
    return buf.ptr, buf.nbytes


def _location(where: Any, op: str) -> tuple[Any, DeviceState | None]:
    """A CUmemLocation for a Device, an ordinal or "host"; and the device's state (None for the host)."""
    if isinstance(where, str) and where == "host":
        return memory_location(driver(), "host", 0), None
    if isinstance(where, bool) or not isinstance(where, (_core.DeviceCore, int)):
        raise invalid(op, f"the location must be a Device, a device ordinal or 'host', got {where!r}")
    st = state_of(where, op, "the location")
    return memory_location(driver(), "device", st.ordinal), st


def prefetch(buf: DeviceBuf, to: Any, stream: Stream | None = None) -> None:
    """Migrate `buf`'s pages to device `to` (a Device or ordinal) or to "host", queued on `stream`.

    `stream` defaults to the buffer's device's default stream; the call returns at once.
    """
    op = "cuMemPrefetchAsync"
    _managed(buf, op)
    loc, dev = _location(to, op)
    if dev is not None and not dev.attributes.concurrent_managed_access:
        raise Unsupported("cuda", op, f"cuda:{dev.ordinal} has no concurrent managed access, so managed memory "
                          "cannot be prefetched to it")
    s = check_stream(buf.device, stream, op)
    buf.device._bind_here()
    call(op, buf.ptr, buf.nbytes, loc, 0, s._h)


def advise(buf: DeviceBuf, advice: str, location: Any = None) -> None:
    """Tell the driver how `buf` is used: "read_mostly", "preferred_location", "accessed_by" or an `"unset_..."` one.

    "preferred_location" and "accessed_by" (and "unset_accessed_by") need a
    `location` (a Device, an ordinal or "host").
    """
    op = "cuMemAdvise"
    _managed(buf, op)
    if not isinstance(advice, str) or advice not in _ADVICE:
        raise invalid(op, f"advice must be one of {sorted(_ADVICE)}, got {advice!r}")
    if advice in _NEEDS_LOCATION and location is None:
        raise invalid(op, f"{advice!r} needs a location (a Device, an ordinal or 'host')")
    loc, _ = _location(buf.device if location is None else location, op)
    buf.device._bind_here()
    call(op, buf.ptr, buf.nbytes, getattr(driver().CUmem_advise, _ADVICE[advice]), loc)


def attach(buf: DeviceBuf, stream: Stream, mode: str = "single") -> None:
    """Change which streams may use `buf`'s allocation: "single" (only `stream`), "global" or "host".

    Queued on `stream`; takes effect when the stream reaches it.
    """

    op = "cuStreamAttachMemAsync"
    base, _ = _managed(buf, op)
    if not isinstance(mode, str) or mode not in _ATTACH:
        raise invalid(op, f"mode must be one of {sorted(_ATTACH)}, got {mode!r}")
    if not isinstance(stream, Stream):
        raise invalid(op, f"stream must be a Stream, got {type(stream).__name__}")
    s = check_stream(buf.device, stream, op)
    buf.device._bind_here()
    call(op, s._h, base, 0, _ATTACH[mode])


def _where(value: int) -> int | str | None:
    if value == CU_DEVICE_CPU:
        return "host"
    return None if value < 0 else value


def managed_info(buf: DeviceBuf) -> ManagedInfo:
    """Read-mostly, preferred location, last prefetch location and accessed-by devices of `buf`'s range."""

    op = "cuMemRangeGetAttribute"
    _managed(buf, op)
    attrs = driver().CUmem_range_attribute

    def get(name: str, size: int = 4) -> Any:
        return call(op, size, getattr(attrs, "CU_MEM_RANGE_ATTRIBUTE_" + name), buf.ptr, buf.nbytes)

    n = max(device_count(), 1) + 1
    accessed = get("ACCESSED_BY", 4 * n)
    ids = list(accessed) if isinstance(accessed, (list, tuple)) else [accessed]
    return ManagedInfo(
        read_mostly=bool(int(get("READ_MOSTLY"))),
        preferred_location=_where(int(get("PREFERRED_LOCATION"))),
        last_prefetch_location=_where(int(get("LAST_PREFETCH_LOCATION"))),
        accessed_by=tuple(w for w in (_where(int(i)) for i in ids) if w is not None),
    )


def host_array(buf: DeviceBuf) -> np.ndarray:
    """A numpy view of `buf` when the host can address its memory (managed or host-pool memory)."""
    op = "host_array"
    if not is_devicebuf(buf):
        raise invalid(op, f"expected a DeviceBuf, got {type(buf).__name__}")
    if buf.ptr is None:
        raise closed(op, "buffer")
    if host_ranges.find(buf.ptr, buf.nbytes) is None:
        raise invalid(op, "the host cannot address this buffer's memory (it is device memory); use copy_to_host(), "
                      "or allocate it with ManagedAllocator or a host pool")
    return np.asarray(_HostArrayOwner(buf.ptr, buf.size, buf.dtype.numpy, buf))
