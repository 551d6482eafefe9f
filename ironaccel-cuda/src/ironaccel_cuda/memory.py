"""Device memory (DeviceBuf), page-locked host memory (PinnedBuf) and interop.

A DeviceBuf is `size` elements of `dtype` on one device, allocated stream-
ordered (`cuMemAllocAsync`) on its *home stream* and freed there on `close()`
(its docstring has the rules).  It is compiled, with all its methods, in
`_core`.  Pooled buffers (`MemPool.alloc`), foreign views
(`DeviceBuf.from_foreign`) and adopted memory (`adopt`) are DeviceBufs too.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
import warnings
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ironaccel import DType

from . import _core, _devices, _driver
from . import dtypes as _dtypes
from ._driver import call, driver, try_call
from .errors import Unsupported, closed, driver_error, invalid

if TYPE_CHECKING:
    from .device import Device
    from .stream import Stream

__all__ = [
    "DeviceBuf", "HostFlags", "PinnedBuf", "address_range", "adopt", "alloc_async", "alloc_pitch", "attach_address",
    "copy_async", "copy_peer", "device_alloc", "device_free", "free_async", "host_alloc", "host_cache", "host_device_pointer",
    "host_flags", "host_free", "host_register", "host_unregister", "managed_alloc", "pinned", "pointer_attribute",
]

_new = object.__new__


DeviceBuf = _core.DeviceBuf
host_cache = _core.host_cache
"""Typed device memory; compiled in `_core` (native/_core_buffer.pxi), with every method."""


class _ReleaseOnce:
    """Calls `release()` of an adopted allocation once, however the buffer ends (close or collection)."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Any):
        self._fn = fn

    def release(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()


def adopt(ptr: int, size: int, dtype: Any, device: Device, *, stream: Stream | None = None,
          release: Any = None, keepalive: Any = None) -> DeviceBuf:
    """A DeviceBuf over `size` elements of `dtype` at device address `ptr` that something else allocated.

    `release()` (if given) is called once, when the buffer is closed or collected, and must give the
    memory back (allocators, IPC imports and virtual-memory buffers use this); without it the buffer
    is a view that frees nothing.  `keepalive` is referenced until then.  `stream` is the home stream
    (default: the device's default stream).
    """

    op = "DeviceBuf.adopt"
    dt, npdt, _ = _dtypes.spec(dtype, op)
    if isinstance(ptr, bool) or not isinstance(ptr, int) or ptr <= 0:
        raise invalid(op, f"ptr must be a positive device address (int), got {ptr!r}")
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise invalid(op, f"size must be a positive int (elements), got {size!r}")
    home = device._state.default_stream if stream is None else stream
    if release is None:
        return DeviceBuf._wrap(ptr, size, dt, npdt, device, home, None, base=keepalive)
    return DeviceBuf._wrap(ptr, size, dt, npdt, device, home, _core.RELEASE_IMPORTED,
                           base=(keepalive, _ReleaseOnce(release)))


# -- pinned host memory -------------------------------------------------------


CU_MEMHOSTALLOC_PORTABLE = 0x1
CU_MEMHOSTALLOC_DEVICEMAP = 0x2
CU_MEMHOSTALLOC_WRITECOMBINED = 0x4


class _HostArrayOwner:
    """Exposes host-addressable memory to numpy and keeps its owner (PinnedBuf, DeviceBuf) alive while arrays exist."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, ptr: int, size: int, npdt: np.dtype, owner: Any):
        self.__array_interface__ = {"shape": (size,), "typestr": npdt.str, "data": (ptr, False), "version": 3}
        self.owner = owner


class PinnedBuf:
    """Page-locked host memory, usable as a numpy array (`.array`) and for fast async copies.

    Allocate with `dev.alloc_pinned(size, dtype, mapped=, write_combined=,
    portable=)`; those flags are readable here.  `close()` frees it now
    (idempotent): arrays taken from `.array`, and device views of it
    (`dev.device_view`), must not be used afterwards.
    """

    # The buffer holds its array weakly: the array holds the buffer (through _HostArrayOwner), and numpy arrays
    # are not tracked by the garbage collector, so a strong reference back made a cycle that was never freed
    # (memcheck found such a buffer still allocated at exit).
    __slots__ = ("ptr", "nbytes", "size", "dtype", "device", "_array", "_flags", "__weakref__")
    ptr: int | None
    nbytes: int
    size: int
    dtype: DType
    device: Device
    _array: weakref.ref[np.ndarray] | None
    _flags: int

    def __init__(self) -> None:
        raise TypeError("allocate with Device.alloc_pinned()")

    @classmethod
    def _make(cls, ptr: int, size: int, dtype: DType, device: Device, flags: int = CU_MEMHOSTALLOC_PORTABLE
              ) -> PinnedBuf:
        p = _new(cls)
        npdt = dtype.numpy
        p.ptr = ptr
        p.size = size
        p.nbytes = size * npdt.itemsize
        p.dtype = dtype
        p.device = device
        p._flags = flags
        p._array = None
        _core.pinned_add(ptr, p.nbytes)
        return p

    @property
    def mapped(self) -> bool:
        """The device can address this memory (`dev.device_view(p.array)`)."""
        return bool(self._flags & CU_MEMHOSTALLOC_DEVICEMAP)

    @property
    def write_combined(self) -> bool:
        """Write-combined memory: fast for the host to write and the device to read, slow for the host to read."""
        return bool(self._flags & CU_MEMHOSTALLOC_WRITECOMBINED)

    @property
    def portable(self) -> bool:
        """Every context may use this memory as pinned, not only the one that allocated it."""
        return bool(self._flags & CU_MEMHOSTALLOC_PORTABLE)

    @property
    def array(self) -> np.ndarray:
        """The memory as a 1-D numpy array (the same array while one is alive; it keeps this buffer alive)."""
        ptr = self.ptr
        if ptr is None:
            raise closed("PinnedBuf.array", "pinned buffer")
        arr = self._array() if self._array is not None else None
        if arr is None:
            arr = np.asarray(_HostArrayOwner(ptr, self.size, self.dtype.numpy, self))
            self._array = weakref.ref(arr)
        return arr

    @property
    def closed(self) -> bool:
        """Whether the memory was freed."""
        return self.ptr is None

    def close(self) -> None:
        """Free the page-locked memory (cuMemFreeHost).  Idempotent; arrays of it must not be used after."""
        ptr = self.ptr
        self.ptr = None
        if ptr is not None:
            self._array = None
            _core.pinned_remove(ptr)
            _driver.call("cuMemFreeHost", ptr)  # through the module: tests replace it

    def __enter__(self) -> PinnedBuf:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "ptr", None) is not None:
            try:
                self.close()
            except Exception as exc:  # said, not swallowed: the page-locked memory may be left behind
                if not sys.is_finalizing():
                    warnings.warn(f"PinnedBuf: freeing it on collection failed: {exc}", RuntimeWarning,
                                  stacklevel=2)

    def __repr__(self) -> str:
        state = "closed" if self.ptr is None else hex(self.ptr)
        return f"<PinnedBuf {state} {self.size} x {self.dtype.value}>"


CU_MEMHOSTREGISTER_PORTABLE = 0x1
CU_MEMHOSTREGISTER_DEVICEMAP = 0x2
CU_MEMHOSTREGISTER_IOMEMORY = 0x4
CU_MEMHOSTREGISTER_READ_ONLY = 0x8


def pointer_attribute(ptr: int, name: str) -> int | None:
    """One attribute of any address, ironaccel's or another library's, as the driver knows it
    (cuPointerGetAttribute): "memory_type" (a CUmemorytype value), "device_ordinal", "is_managed",
    "range_start_addr", "range_size", "buffer_id", ... (`CUpointer_attribute` names, with or without their
    prefix, any case), as an int.

    None when the driver does not know the address (CUDA_ERROR_INVALID_VALUE: pageable host memory, or no
    memory at all); other driver errors are raised.  Needs no current context.
    """
    op = "cuPointerGetAttribute"
    if isinstance(ptr, bool) or not isinstance(ptr, (int, np.integer)) or not 0 <= int(ptr) < 1 << 64:
        raise invalid(op, f"expected an address (a non-negative int below 2**64), got {ptr!r}")
    key = name.upper() if isinstance(name, str) else ""
    attr = getattr(driver().CUpointer_attribute, key if key.startswith("CU_POINTER_ATTRIBUTE_") else
                   "CU_POINTER_ATTRIBUTE_" + key, None) if key else None
    if attr is None:
        raise invalid(op, f"no pointer attribute named {name!r}")
    err, value = try_call(op, attr, int(ptr))
    if err == 1:  # CUDA_ERROR_INVALID_VALUE: an address the driver does not know
        return None
    if err:
        raise driver_error(err, op)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise invalid(op, f"{name!r} is not an int-valued pointer attribute") from None


def _address(ptr: Any, op: str) -> int:
    """`ptr` as an int address; InvalidArgument naming `op` for anything else (or 0, or past 2**64)."""
    if isinstance(ptr, bool) or not isinstance(ptr, (int, np.integer)) or not 0 < int(ptr) < 1 << 64:
        raise invalid(op, f"expected an address (a positive int below 2**64), got {ptr!r}")
    return int(ptr)


def _flag(name: str, value: Any, op: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(op, f"{name} must be a bool, got {value!r}")
    return value


# -- page-locked host memory by address, in the current context -----------------------------------------------------
# For code that keeps contexts of its own (the PyCUDA compat, another library's context): the context current on
# the calling thread, whoever made it current, allocates, registers and frees; nothing here opens or binds a device.
# `Device.alloc_pinned`, `PinnedBuf` and `pinned()` are the object forms.  Memory page-locked here is known to
# ironaccel's copies as page-locked (their fast paths) until `host_free` / `host_unregister`.


@dataclass(frozen=True)
class HostFlags:
    """How page-locked host memory was allocated (cuMemHostGetFlags), named as `Device.alloc_pinned` takes it."""

    portable: bool
    mapped: bool
    write_combined: bool


def host_alloc(nbytes: int, *, portable: bool = True, mapped: bool = False, write_combined: bool = False) -> int:
    """The address of `nbytes` of page-locked host memory from the current context (cuMemHostAlloc): the flags
    are `Device.alloc_pinned`'s.  Give it back with `host_free`; destroying the context frees it too."""
    op = "cuMemHostAlloc"
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or not 0 < int(nbytes) < 1 << 64:
        raise invalid(op, f"nbytes must be a positive int below 2**64, got {nbytes!r}")
    flags = ((CU_MEMHOSTALLOC_PORTABLE if _flag("portable", portable, op) else 0)
             | (CU_MEMHOSTALLOC_DEVICEMAP if _flag("mapped", mapped, op) else 0)
             | (CU_MEMHOSTALLOC_WRITECOMBINED if _flag("write_combined", write_combined, op) else 0))
    ptr = int(call(op, int(nbytes), flags))
    _core.pinned_add(ptr, int(nbytes))
    return ptr


def host_free(ptr: int) -> None:
    """Free page-locked memory from `host_alloc` (cuMemFreeHost), with its context (or another) current."""
    op = "cuMemFreeHost"
    ptr = _address(ptr, op)
    _core.pinned_remove(ptr)
    call(op, ptr)


def host_register(ptr: int, nbytes: int, *, portable: bool = True, mapped: bool = False, read_only: bool = False,
                  io_memory: bool = False) -> None:
    """Page-lock `nbytes` of existing host memory at `ptr` for the current context (cuMemHostRegister), with
    `pinned()`'s flags, and `io_memory` for a mapping of a device's I/O memory (a PCIe BAR) rather than RAM;
    `host_unregister` ends it.  `pinned()` is the form for a numpy array and a block."""
    op = "cuMemHostRegister"
    ptr = _address(ptr, op)
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or not 0 < int(nbytes) < 1 << 64:
        raise invalid(op, f"nbytes must be a positive int below 2**64, got {nbytes!r}")
    flags = ((CU_MEMHOSTREGISTER_PORTABLE if _flag("portable", portable, op) else 0)
             | (CU_MEMHOSTREGISTER_DEVICEMAP if _flag("mapped", mapped, op) else 0)
             | (CU_MEMHOSTREGISTER_READ_ONLY if _flag("read_only", read_only, op) else 0)
             | (CU_MEMHOSTREGISTER_IOMEMORY if _flag("io_memory", io_memory, op) else 0))
    call(op, ptr, int(nbytes), flags)
    _core.pinned_add(ptr, int(nbytes))


def host_unregister(ptr: int) -> None:
    """End `host_register`'s page-locking of the memory at `ptr` (cuMemHostUnregister)."""
    op = "cuMemHostUnregister"
    ptr = _address(ptr, op)
    _core.pinned_remove(ptr)
    call(op, ptr)


def host_device_pointer(ptr: int) -> int:
    """The device address of mapped page-locked host memory at `ptr` (`mapped=True`), for the current context
    (cuMemHostGetDevicePointer); `Device.device_view` is the DeviceBuf form."""
    op = "cuMemHostGetDevicePointer"
    return int(call(op, _address(ptr, op), 0))


def host_flags(ptr: int) -> HostFlags:
    """How the page-locked memory at `ptr` was allocated (cuMemHostGetFlags); the driver's
    CUDA_ERROR_INVALID_VALUE for memory that is not page-locked."""
    op = "cuMemHostGetFlags"
    flags = int(call(op, _address(ptr, op)))
    return HostFlags(bool(flags & CU_MEMHOSTALLOC_PORTABLE), bool(flags & CU_MEMHOSTALLOC_DEVICEMAP),
                     bool(flags & CU_MEMHOSTALLOC_WRITECOMBINED))


def _context(ctx: Any, op: str, what: str) -> int:
    if isinstance(ctx, bool) or not isinstance(ctx, (int, np.integer)) or not 0 < int(ctx) < 1 << 64:
        raise invalid(op, f"the {what} must be a CUcontext address (a positive int), got {ctx!r}")
    return int(ctx)


def copy_peer(dst: int, dst_context: int, src: int, src_context: int, nbytes: int, stream: Any = None) -> None:
    """Copy `nbytes` from device address `src` of context `src_context` to `dst` of `dst_context` (CUcontext
    addresses: `current_context_handle()`, another library's), across devices too, whichever context is current.

    Without `stream`, cuMemcpyPeer: it returns once the copy is done, ordered after both contexts' earlier work.
    With `stream` (a Stream, a CUstream address or an object with `__cuda_stream__`), cuMemcpyPeerAsync queued on
    it.  `DeviceBuf.copy_from` is the form for buffers.
    """
    op = "cuMemcpyPeer" if stream is None else "cuMemcpyPeerAsync"
    d, s = _address(dst, op), _address(src, op)
    dctx, sctx = _context(dst_context, op, "destination context"), _context(src_context, op, "source context")
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or not 0 <= int(nbytes) < 1 << 64:
        raise invalid(op, f"nbytes must be a non-negative int below 2**64, got {nbytes!r}")
    drv = driver()
    if stream is None:
        call(op, d, drv.CUcontext(dctx), s, drv.CUcontext(sctx), int(nbytes))
        return
    call(op, d, drv.CUcontext(dctx), s, drv.CUcontext(sctx), int(nbytes), _stream_handle(stream, op))


# -- device memory by address, in the current context ------------------------------------------------------------
# The same contract as the host-memory functions above: the calling thread's current context allocates and frees,
# nothing here opens or binds a device, and the caller owns the address.  `Device.alloc` (a pooled, typed DeviceBuf)
# is the form for everything else.

_ATTACH = {"global": 1, "host": 2, "single": 4}  # CU_MEM_ATTACH_GLOBAL, _HOST, _SINGLE


def _nbytes(nbytes: Any, op: str, *, zero: bool = False) -> int:
    low = 0 if zero else 1
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or not low <= int(nbytes) < 1 << 64:
        raise invalid(op, f"nbytes must be a {'non-negative' if zero else 'positive'} int below 2**64, got {nbytes!r}")
    return int(nbytes)


def _stream_handle(stream: Any, op: str) -> Any:
    """The CUstream of a Stream, a CUstream address (0: the legacy stream) or an object with `__cuda_stream__`."""
    if isinstance(stream, _core.StreamCore):
        if stream._h is _core.CLOSED:
            raise closed(op, "stream")
        return stream._h
    h = stream.__cuda_stream__()[1] if hasattr(stream, "__cuda_stream__") else stream
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or not 0 <= int(h) < 1 << 64:
        raise invalid(op, f"stream must be a Stream, a CUstream address or an object with __cuda_stream__, "
                      f"got {stream!r}")
    return int(h)


def device_alloc(nbytes: int) -> int:
    """The address of `nbytes` of device memory from the current context, outside any pool (cuMemAlloc); give it
    back with `device_free`.  For code that keeps contexts of its own, as `host_alloc` is."""
    op = "cuMemAlloc"
    return int(call(op, _nbytes(nbytes, op)))


def device_free(ptr: int) -> None:
    """Free memory from `device_alloc`, `managed_alloc` or `alloc_pitch` (cuMemFree; it waits for the device's
    work on it)."""
    op = "cuMemFree"
    call(op, _address(ptr, op))


def managed_alloc(nbytes: int, *, attach: str = "global") -> int:
    """The address of `nbytes` of managed (unified) memory from the current context (cuMemAllocManaged): `attach`
    "global" (any stream may use it) or "host" (until a stream attaches it: `attach_address`).  Freed with
    `device_free`.  `managed.ManagedAllocator` is the form for typed buffers."""
    op = "cuMemAllocManaged"
    if attach not in ("global", "host"):
        raise invalid(op, f"attach must be 'global' or 'host', got {attach!r}")
    return int(call(op, _nbytes(nbytes, op), _ATTACH[attach]))


def alloc_pitch(width: int, height: int, element_size: int) -> tuple[int, int]:
    """(address, pitch): `height` rows of `width` bytes from the current context, each row starting `pitch` bytes
    after the last (cuMemAllocPitch; the driver pads rows for coalesced access of `element_size`-byte elements,
    4, 8 or 16).  Freed with `device_free`.  `Device.alloc_pitched` is the form that keeps its shape."""
    op = "cuMemAllocPitch"
    w, h = _nbytes(width, op), _nbytes(height, op)
    if element_size not in (4, 8, 16) or isinstance(element_size, bool):
        raise invalid(op, f"element_size must be 4, 8 or 16, got {element_size!r}")
    ptr, pitch = call(op, w, h, int(element_size))
    return int(ptr), int(pitch)


def attach_address(ptr: int, stream: Any, *, mode: str = "single", nbytes: int = 0) -> None:
    """Attach managed memory at `ptr` to `stream` (cuStreamAttachMemAsync, queued on it): `mode` "single" (only
    that stream's work touches it), "host" or "global"; `nbytes` 0 is the whole allocation.  `managed.attach` is
    the form for a DeviceBuf."""
    op = "cuStreamAttachMemAsync"
    if mode not in _ATTACH:
        raise invalid(op, f"mode must be one of {sorted(_ATTACH)}, got {mode!r}")
    call(op, _stream_handle(stream, op), _address(ptr, op), _nbytes(nbytes, op, zero=True), _ATTACH[mode])


def alloc_async(nbytes: int, stream: Any) -> int:
    """The address of `nbytes` from the current device's current pool, ordered on `stream` (cuMemAllocAsync): a
    capturing stream records an allocation node.  Give it back with `free_async`."""
    op = "cuMemAllocAsync"
    return int(call(op, _nbytes(nbytes, op), _stream_handle(stream, op)))


def free_async(ptr: int, stream: Any) -> None:
    """Free memory from `alloc_async` (or any pool allocation) ordered on `stream` (cuMemFreeAsync): a capturing
    stream records a free node."""
    op = "cuMemFreeAsync"
    call(op, _address(ptr, op), _stream_handle(stream, op))


def copy_async(dst: int, src: int, nbytes: int, stream: Any) -> None:
    """Copy `nbytes` from address `src` to `dst`, queued on `stream` (cuMemcpyAsync): device, managed or
    page-locked host memory of any context, whichever kind each side is (unified addressing tells the driver).
    `DeviceBuf.copy_from` is the form for buffers; `copy_peer` names the contexts."""
    op = "cuMemcpyAsync"
    d, s = _address(dst, op), _address(src, op)
    call(op, d, s, _nbytes(nbytes, op, zero=True), _stream_handle(stream, op))


def address_range(ptr: int) -> tuple[int, int]:
    """(base, size) of the allocation that holds address `ptr` (cuMemGetAddressRange): whose memory it is, as
    far as the driver knows, ironaccel's or another library's.  Needs a current context; the driver's
    CUDA_ERROR_NOT_FOUND for an address it did not allocate."""
    op = "cuMemGetAddressRange"
    if isinstance(ptr, bool) or not isinstance(ptr, (int, np.integer)) or not 0 <= int(ptr) < 1 << 64:
        raise invalid(op, f"expected an address (a non-negative int below 2**64), got {ptr!r}")
    base, size = call(op, int(ptr))
    return int(base), int(size)


@contextlib.contextmanager
def pinned(array: np.ndarray, device: Device | None = None, *, read_only: bool = False, mapped: bool = False,
           portable: bool = True) -> Iterator[np.ndarray]:
    """Page-lock an existing C-contiguous numpy array for the duration of the block.

    Copies from and to it may then run asynchronously at full bandwidth.  The
    array must not be resized or freed inside the block.  `read_only`: the
    device only reads it (needed for arrays numpy marks read-only; the device
    must support it, `CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED`);
    `mapped`: the device can address it directly (`dev.device_view(array)`);
    `portable`: page-locked for every context, not only this device's.
    """

    op = "cuMemHostRegister"
    if not isinstance(array, np.ndarray):
        raise invalid(op, f"expected a numpy array, got {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise invalid(op, "the array is not C-contiguous")
    if array.nbytes == 0:
        raise invalid(op, "the array is empty")
    for name, value in (("read_only", read_only), ("mapped", mapped), ("portable", portable)):
        if not isinstance(value, bool):
            raise invalid(op, f"{name} must be a bool, got {value!r}")
    if not array.flags.writeable and not read_only:
        raise invalid(op, "the array is read-only: register it with read_only=True")
    st = _devices.state_of(0 if device is None else device, op)
    if read_only:
        if not _devices.attribute(st.cudev, "READ_ONLY_HOST_REGISTER_SUPPORTED"):
            raise Unsupported("cuda", op, f"cuda:{st.ordinal} cannot register host memory read-only")
    if mapped and not st.attributes.can_map_host_memory:
        raise Unsupported("cuda", op, f"cuda:{st.ordinal} cannot map host memory")
    flags = ((CU_MEMHOSTREGISTER_PORTABLE if portable else 0) | (CU_MEMHOSTREGISTER_DEVICEMAP if mapped else 0)
             | (CU_MEMHOSTREGISTER_READ_ONLY if read_only else 0))
    _core.ensure(st.ctx)
    ptr = array.ctypes.data
    call(op, ptr, array.nbytes, flags)
    _core.pinned_add(ptr, array.nbytes)
    try:
        yield array
    finally:
        _core.pinned_remove(ptr)
        _core.ensure(st.ctx)
        call("cuMemHostUnregister", ptr)

