"""Device memory (DeviceBuf), page-locked host memory (PinnedBuf) and interop.

A DeviceBuf is `size` elements of `dtype` on one device, allocated stream-
ordered (`cuMemAllocAsync`) on its *home stream* and freed there on `close()`
(its docstring has the rules).  It is compiled, with all its methods, in
`_core`.  Pooled buffers (`MemPool.alloc`), foreign views
(`DeviceBuf.from_foreign`) and adopted memory (`adopt`) are DeviceBufs too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ironaccel import DType

from . import _core
from .errors import closed, invalid

if TYPE_CHECKING:
    from .device import Device
    from .stream import Stream

__all__ = ["DeviceBuf", "PinnedBuf", "adopt", "host_cache", "pinned"]

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
    from . import dtypes as _dtypes

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


class _HostArrayOwner:
    """Exposes pinned memory to numpy and keeps its PinnedBuf alive while arrays exist."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, ptr: int, size: int, npdt: np.dtype, owner: PinnedBuf):
        self.__array_interface__ = {"shape": (size,), "typestr": npdt.str, "data": (ptr, False), "version": 3}
        self.owner = owner


class PinnedBuf:
    """Page-locked host memory, usable as a numpy array (`.array`) and for fast async copies.

    Allocate with `dev.alloc_pinned(size, dtype)`.  `close()` frees it now
    (idempotent): arrays taken from `.array` must not be used afterwards.
    """

    __slots__ = ("ptr", "nbytes", "size", "dtype", "device", "_array", "__weakref__")

    def __init__(self) -> None:
        raise TypeError("allocate with Device.alloc_pinned()")

    @classmethod
    def _make(cls, ptr: int, size: int, dtype: DType, device: Device) -> PinnedBuf:
        p = _new(cls)
        npdt = dtype.numpy
        p.ptr = ptr
        p.size = size
        p.nbytes = size * npdt.itemsize
        p.dtype = dtype
        p.device = device
        p._array = np.asarray(_HostArrayOwner(ptr, size, npdt, p))
        _core.pinned_add(ptr, p.nbytes)
        return p

    @property
    def array(self) -> np.ndarray:
        if self.ptr is None:
            raise closed("PinnedBuf.array", "pinned buffer")
        return self._array

    @property
    def closed(self) -> bool:
        return self.ptr is None

    def close(self) -> None:
        ptr = self.ptr
        self.ptr = None
        if ptr is not None:
            self._array = None
            _core.pinned_remove(ptr)
            from ._driver import call

            call("cuMemFreeHost", ptr)

    def __enter__(self) -> PinnedBuf:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "ptr", None) is not None:
            try:
                self.close()
            except Exception:
                pass

    def __repr__(self) -> str:
        state = "closed" if self.ptr is None else hex(self.ptr)
        return f"<PinnedBuf {state} {self.size} x {self.dtype.value}>"


CU_MEMHOSTREGISTER_PORTABLE = 0x1


@contextlib.contextmanager
def pinned(array: np.ndarray, device: Device | None = None) -> Iterator[np.ndarray]:
    """Page-lock an existing C-contiguous numpy array for the duration of the block.

    Copies from and to it may then run asynchronously at full bandwidth.  The
    array must not be resized or freed inside the block.
    """
    from ._driver import call
    from .device import Device

    op = "cuMemHostRegister"
    if not isinstance(array, np.ndarray):
        raise invalid(op, f"expected a numpy array, got {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise invalid(op, "the array is not C-contiguous")
    if array.nbytes == 0:
        raise invalid(op, "the array is empty")
    dev = device if device is not None else Device(0)
    dev._bind_here()
    ptr = array.ctypes.data
    call(op, ptr, array.nbytes, CU_MEMHOSTREGISTER_PORTABLE)
    _core.pinned_add(ptr, array.nbytes)
    try:
        yield array
    finally:
        _core.pinned_remove(ptr)
        dev._bind_here()
        call("cuMemHostUnregister", ptr)

