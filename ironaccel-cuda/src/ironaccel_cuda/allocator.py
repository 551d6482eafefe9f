"""One allocator protocol, so every allocation is the same `DeviceBuf`.

    class Allocator(Protocol):
        device: Device
        def allocate(self, size, dtype="uint8", stream=None) -> DeviceBuf: ...
        def deallocate(self, buf, stream=None) -> None: ...

`allocate` returns `size` elements of `dtype` whose home stream is `stream`
(default: the device's default stream): stream-ordered allocators make the
memory usable in that stream's order, the others (direct, virtual, managed)
return memory that is usable at once.  `deallocate(buf, stream)` frees `buf`
after the work queued on `stream` (default: its home stream) -- the home
stream is made to wait for `stream` with an event, then the buffer is closed;
`buf.close()` is the same with no stream.  A buffer the allocator can tell is
not its own (a view, a buffer of another pool or device) is an
InvalidArgument; a closed one a ClosedError.  Closing an allocator never
invalidates its outstanding buffers.

Every ironaccel allocator satisfies it, and each returns a plain DeviceBuf
(copies, views, memset, DLPack, `__cuda_array_interface__`, kernel arguments):

* `dev.default_pool` -- the device's stream-ordered default pool (what `dev.alloc` uses);
* `dev.create_driver_pool(...)` -- a driver pool of its own (`driver_pool.DriverPool`);
* `dev.create_pool(...)` -- ironaccel's bucket cache (`MemPool`, per stream);
* `VirtualAllocator(dev)` -- reserved address space with mapped physical memory (`vmm`);
* `ManagedAllocator(dev)` -- unified memory, also usable from the host (`managed`);
* `DirectAllocator(dev)` -- `cuMemAlloc` / `cuMemFree` (the memory legacy IPC handles export);
* `ExternalAllocator(dev, allocate, deallocate)` -- anybody's allocator by pointer, e.g.
  PyTorch's caching allocator or an RMM memory resource:

      torch_alloc = cu.ExternalAllocator(
          dev, lambda nbytes, s: torch.cuda.caching_allocator_alloc(nbytes, dev.ordinal, s.handle),
          lambda ptr, nbytes, s: torch.cuda.caching_allocator_delete(ptr))
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from . import _core, _driver
from . import dtypes as _dtypes
from ._devices import open_device
from ._driver import call
from .errors import closed, invalid
from .memory import adopt
from .stream import Stream

if TYPE_CHECKING:
    from .device import Device

    DeviceBuf = Any  # memory.DeviceBuf is made at run time, so it cannot be a static type

__all__ = ["Allocator", "DirectAllocator", "ExternalAllocator", "deallocate", "host_ranges"]


@runtime_checkable
class Allocator(Protocol):
    """What every ironaccel allocator offers; see the module docstring."""

    device: Device

    def allocate(self, size: int, dtype: Any = "uint8", stream: Stream | None = None) -> DeviceBuf:
        """`size` elements of `dtype` as a DeviceBuf with home stream `stream` (default: the default stream)."""
        ...

    def deallocate(self, buf: DeviceBuf, stream: Stream | None = None) -> None:
        """Free `buf` after the work queued on `stream` (default: its home stream); refuses buffers not made here."""
        ...


def is_devicebuf(obj: Any) -> bool:
    """isinstance(obj, DeviceBuf), for modules that cannot name the run-time class as a type."""

    cls: type = _core.DeviceBuf
    return isinstance(obj, cls)


def check_stream(device: Device, stream: Any, op: str, same_device: bool = False) -> Stream:
    """`stream`, or the device's default stream for None; typed errors for anything else, and with `same_device`
    for a stream of another device (one that becomes a buffer's home, or that NCCL runs on)."""

    if stream is None:
        return device.default_stream
    if not isinstance(stream, Stream):
        raise invalid(op, f"stream must be a Stream, got {type(stream).__name__}")
    if stream._h is _core.CLOSED:
        raise closed(op, "stream")
    if same_device and stream._ordinal != device.ordinal:
        raise device._bad_stream(stream, op)
    return stream


def element_count(device: Device, size: Any, dtype: Any, op: str, most: int | None = None) -> tuple[Any, int, int]:
    """(DType, elements, bytes) of a request, checked: a positive int count of a known dtype, at most `most` bytes."""
    dt, _, itemsize = _dtypes.spec(dtype, op)
    size = device._size_arg(size, op)
    nbytes = size * itemsize
    if nbytes <= 0 or (most is not None and nbytes > most):
        raise device._bad_size(size, nbytes, op)
    return dt, size, nbytes


def deallocate(allocator: Any, buf: Any, stream: Any, op: str, *, owned: bool | None = None) -> None:
    """The protocol's `deallocate`: check `buf`, order its home stream after `stream`, close it.

    `owned` is False when the allocator knows `buf` is not one of its own allocations.
    """
    if not is_devicebuf(buf):
        raise invalid(op, f"expected a DeviceBuf, got {type(buf).__name__}")
    if buf.ptr is None:
        raise closed(op, "buffer")
    if buf.device.ordinal != allocator.device.ordinal:
        raise invalid(op, f"the buffer is on cuda:{buf.device.ordinal}; this allocator serves "
                      f"cuda:{allocator.device.ordinal}")
    if owned is False:
        raise invalid(op, "the buffer was not allocated here (a view, or another allocator's buffer): close() "
                      "it, or deallocate it through the allocator that made it")
    if stream is not None:
        s = check_stream(buf.device, stream, op)
        home = int(buf.__cuda_array_interface__["stream"])
        if int(s._h) != home:
            event = buf.device.create_event()
            try:
                event.record(s)
                _core.stream_wait(int(home), event._h)
            finally:
                event.close()
    buf.close()


class _Ranges:
    """Live allocations the host can address too (managed memory, host-pool memory), by base address."""

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._info: dict[int, tuple[int, str]] = {}
        self._lock = threading.Lock()

    def add(self, base: int, nbytes: int, kind: str) -> None:
        with self._lock:
            if base not in self._info:
                bisect.insort(self._bases, base)
            self._info[base] = (nbytes, kind)

    def remove(self, base: int) -> None:
        with self._lock:
            if self._info.pop(base, None) is not None:
                del self._bases[bisect.bisect_left(self._bases, base)]

    def find(self, ptr: int, nbytes: int) -> tuple[int, int, str] | None:
        """(base, bytes, kind) of the allocation holding [ptr, ptr + nbytes), if one is registered."""
        with self._lock:
            i = bisect.bisect_right(self._bases, ptr) - 1
            if i < 0:
                return None
            base = self._bases[i]
            size, kind = self._info[base]
            return (base, size, kind) if ptr + nbytes <= base + size else None


host_ranges = _Ranges()


class _Tracked:
    """Outstanding allocations by base address, so `deallocate` can tell its own buffers."""

    device: Device

    def __init__(self) -> None:
        self._live: dict[int, int] = {}
        self._lock = threading.Lock()

    def _add(self, ptr: int, nbytes: int) -> None:
        with self._lock:
            self._live[ptr] = nbytes

    def _drop(self, ptr: int) -> None:
        with self._lock:
            self._live.pop(ptr, None)

    def _owns(self, buf: Any) -> bool:
        with self._lock:
            return getattr(buf, "ptr", None) in self._live

    def outstanding(self) -> int:
        """Bytes allocated here and not yet freed."""
        with self._lock:
            return sum(self._live.values())


class DirectAllocator(_Tracked):
    """`cuMemAlloc` / `cuMemFree`: memory straight from the driver, not stream-ordered.

    `allocate` returns memory usable at once by any stream; freeing waits for
    the buffer's home stream, then calls `cuMemFree` (which may synchronize the
    device).  This is the memory that legacy IPC handles (`ipc.export`) and most
    foreign libraries' caching allocators use.
    """

    def __init__(self, device: Device):
        super().__init__()
        open_device(device, "DirectAllocator")
        self.device = device

    def allocate(self, size: int, dtype: Any = "uint8", stream: Stream | None = None) -> DeviceBuf:
        """`size` elements of `dtype` from cuMemAlloc, usable at once by any stream; `stream` is the home stream."""
        op = "cuMemAlloc"
        self.device._check_open(op)
        dt, size, nbytes = element_count(self.device, size, dtype, op, self.device.total_memory)
        s = check_stream(self.device, stream, op)
        self.device._bind_here()
        ptr = int(call(op, nbytes))
        self._add(ptr, nbytes)
        return adopt(ptr, size, dt, self.device, stream=s, release=_DirectFree(self, ptr, s))

    def deallocate(self, buf: DeviceBuf, stream: Stream | None = None) -> None:
        """Free `buf` (cuMemFree) after the work queued on `stream` (default: its home stream)."""
        deallocate(self, buf, stream, "DirectAllocator.deallocate", owned=self._owns(buf))

    def __repr__(self) -> str:
        return f"<DirectAllocator for cuda:{self.device.ordinal}>"


class _DirectFree:
    """The release of a cuMemAlloc-style allocation: wait for its home stream, then cuMemFree."""

    __slots__ = ("owner", "ptr", "stream")

    def __init__(self, owner: _Tracked, ptr: int, stream: Stream):
        self.owner, self.ptr, self.stream = owner, ptr, stream

    def __call__(self) -> None:
        self.owner._drop(self.ptr)
        release_after(self.owner.device, self.stream, "cuMemFree", self.ptr)


def release_after(device: Device, stream: Stream, op: str, ptr: int) -> None:
    """Wait for `stream` (the default stream once it is closed), then driver call `op(ptr)` in `device`'s context."""
    if _driver.forked:
        return
    h = stream._h
    _core.stream_sync(device._state.default_stream._h if h is _core.CLOSED else h)
    _core.ensure(device._state.ctx)
    call(op, ptr)


class ExternalAllocator(_Tracked):
    """Another library's allocator, by pointer, behind the allocator protocol.

    `allocate(nbytes, stream) -> int` returns a device address of at least
    `nbytes` bytes on `device`; `deallocate(ptr, nbytes, stream)` gives it
    back.  Both receive the buffer's home stream (an ironaccel `Stream`; its
    `.handle` is the CUstream address other libraries take).  `deallocate` is
    called once per buffer, when it is closed or collected.
    """

    def __init__(self, device: Device, allocate: Callable[[int, Any], int],
                 deallocate: Callable[[int, int, Any], Any]):
        super().__init__()

        op = "ExternalAllocator"
        open_device(device, op)
        if not callable(allocate) or not callable(deallocate):
            raise invalid(op, "allocate and deallocate must be callables: allocate(nbytes, stream) -> ptr, "
                          "deallocate(ptr, nbytes, stream)")
        self.device = device
        self._allocate = allocate
        self._deallocate = deallocate

    def allocate(self, size: int, dtype: Any = "uint8", stream: Stream | None = None) -> DeviceBuf:
        """`size` elements of `dtype` from the wrapped `allocate(nbytes, stream)`, as a DeviceBuf it frees on close."""
        op = "ExternalAllocator.allocate"
        self.device._check_open(op)
        dt, size, nbytes = element_count(self.device, size, dtype, op)
        s = check_stream(self.device, stream, op)
        ptr = self._allocate(nbytes, s)
        if hasattr(ptr, "__int__") and not isinstance(ptr, (bool, float)):
            ptr = int(ptr)
        if not isinstance(ptr, int) or ptr <= 0:
            raise invalid(op, f"the allocate function returned {ptr!r}, not a device address")
        self._add(ptr, nbytes)
        return adopt(ptr, size, dt, self.device, stream=s, release=_ExternalFree(self, ptr, nbytes, s))

    def deallocate(self, buf: DeviceBuf, stream: Stream | None = None) -> None:
        """Free `buf` through the wrapped `deallocate` after the work queued on `stream` (default: its home stream)."""
        deallocate(self, buf, stream, "ExternalAllocator.deallocate", owned=self._owns(buf))

    def __repr__(self) -> str:
        return f"<ExternalAllocator {getattr(self._allocate, '__qualname__', '?')} for cuda:{self.device.ordinal}>"


class _ExternalFree:
    __slots__ = ("owner", "ptr", "nbytes", "stream")

    def __init__(self, owner: ExternalAllocator, ptr: int, nbytes: int, stream: Stream):
        self.owner, self.ptr, self.nbytes, self.stream = owner, ptr, nbytes, stream

    def __call__(self) -> None:
        self.owner._drop(self.ptr)
        if not _driver.forked:
            self.owner._deallocate(self.ptr, self.nbytes, self.stream)
