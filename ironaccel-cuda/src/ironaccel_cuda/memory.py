"""Device memory (DeviceBuf), page-locked host memory (PinnedBuf) and interop.

A DeviceBuf is `size` elements of `dtype` on one device, allocated stream-
ordered (`cuMemAllocAsync`) on its *home stream* -- the stream given at
allocation, else the device's default stream -- and freed there on `close()`,
on leaving a `with` block or when garbage collected.  Operations default to the
home stream and are synchronous when no stream is given; given a stream they
are asynchronous on it.  A buffer used on a stream other than its home stream
must be ordered (`home.wait(event)`) before it is closed, as with every
stream-ordered allocator.

`buf[a:b]` is a view that keeps its parent alive; closing the parent closes
its views.  Pooled buffers (`MemPool.alloc`) and foreign views
(`DeviceBuf.from_foreign`) are DeviceBufs too.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ironaccel import DType
from ironaccel.errors import IronAccelError

from . import _hot
from ._hot import CLOSED
from .errors import closed, invalid

if TYPE_CHECKING:
    from .device import Device
    from .stream import Stream

__all__ = ["DeviceBuf", "PinnedBuf", "adopt", "pinned"]

_ndarray = np.ndarray
_new = object.__new__


def _np_dtype(dtype: DType) -> np.dtype:
    return dtype.numpy


class DeviceBufMethods:
    """DeviceBuf's methods off the hot path.

    `DeviceBuf` (below) is made by `_hot.buffer_class`: its fields and hot
    methods (close, copy_from / copy_to_host of numpy arrays, `_wrap`) come
    from the hot module, everything else from here.
    """

    __slots__ = ()

    def __init__(self) -> None:
        raise TypeError("allocate with Device.alloc(), MemPool.alloc() or DeviceBuf.from_foreign()")

    def __enter__(self) -> DeviceBuf:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- views --------------------------------------------------------------

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: slice) -> DeviceBuf:
        """A view of elements `key` (a slice with step 1); keeps this buffer alive."""
        op = "DeviceBuf.__getitem__"
        if self.ptr is None:
            raise closed(op, "buffer")
        if not isinstance(key, slice):
            raise invalid(op, f"index with a slice (buf[a:b]), got {key!r}")
        start, stop, step = key.indices(self.size)
        if step != 1:
            raise invalid(op, "views must be contiguous (step 1)")
        if stop <= start:
            raise invalid(op, f"empty view {start}:{stop} of a buffer of {self.size} elements")
        itemsize = self._npdt.itemsize
        view = DeviceBuf._wrap(
            _hot.devptr(self.ptr + start * itemsize), stop - start, self.dtype, self._npdt, self.device,
            self._stream, None, base=self,
        )
        if self._views is None:
            self._views = []
        else:
            self._views = [r for r in self._views if r() is not None]
        self._views.append(weakref.ref(view))
        return view

    # -- memset and copies -------------------------------------------------

    def memset(self, value: int | float = 0, stream: Stream | None = None) -> None:
        """Fill with `value`: a byte (0-255), or an element value for 2- and 4-byte dtypes."""
        op = "DeviceBuf.memset"
        s, sync = self._stream_for(stream, op)
        itemsize = self._npdt.itemsize
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value <= 255 and (
            value == 0 or itemsize == 1
        ):
            fill, count, width = int(value), self.nbytes, 1
        elif itemsize in (2, 4):
            try:
                bits = np.asarray(value, dtype=self._npdt).view(np.uint16 if itemsize == 2 else np.uint32)
            except (TypeError, ValueError, OverflowError):
                raise invalid(op, f"cannot represent {value!r} as {self.dtype.value}") from None
            fill, count, width = int(bits), self.size, itemsize
        else:
            raise invalid(op, f"only byte fills (0-255) are supported for {self.dtype.value}, got {value!r}")
        try:
            if width == 1:
                _hot.memset_d8(self._dp, fill, count, s._h)
            elif width == 2:
                _hot.memset_d16(self._dp, fill, count, s._h)
            else:
                _hot.memset_d32(self._dp, fill, count, s._h)
        except IronAccelError:
            raise
        except TypeError:
            raise self._diagnose("cuMemsetD8Async", s) from None
        if sync:
            _hot.stream_sync(s._h)

    def _copy_from_other(self, src: Any, stream: Stream | None) -> None:
        """copy_from for everything but an exact numpy array (the hot case, in `_hot.BufCore`)."""
        if isinstance(src, DeviceBuf):
            self._copy_device(src, stream)
            return
        if isinstance(src, np.ndarray):  # a subclass (memmap, ...): copy from its base-class view
            self.copy_from(np.asarray(src), stream)
            return
        if hasattr(src, "__cuda_array_interface__") or hasattr(src, "__dlpack__"):
            if hasattr(src, "__dlpack_device__") and src.__dlpack_device__()[0] == 1:  # a CPU array
                self.copy_from(np.asarray(src), stream)
                return
            foreign = DeviceBuf.from_foreign(src)
            try:
                self._copy_device(foreign, stream)
            finally:
                foreign.close()
            return
        raise invalid("DeviceBuf.copy_from", f"cannot copy from {type(src).__name__}; pass a numpy array or a "
                      "device array")

    def _copy_device(self, src: DeviceBuf, stream: Stream | None) -> None:
        op = "cuMemcpyDtoDAsync"
        if self.ptr is None:
            raise closed(op, "destination buffer")
        if src.ptr is None:
            raise closed(op, "source buffer")
        if src.nbytes != self.nbytes or src.dtype is not self.dtype:
            raise invalid(op, f"source is {src.size} x {src.dtype.value}, destination {self.size} x "
                          f"{self.dtype.value}; sizes and dtypes must match")
        s, sync = (self._stream, True) if stream is None else (stream, False)
        if s._ordinal not in (self._ordinal, src._ordinal):
            raise invalid(op, f"stream is on cuda:{s._ordinal}, the buffers on cuda:{src._ordinal} and "
                          f"cuda:{self._ordinal}")
        try:
            if src._ordinal == self._ordinal:
                _hot.memcpy_dtod(self._dp, src._dp, self.nbytes, s._h)
            else:
                from ._driver import call

                op = "cuMemcpyPeerAsync"
                call(op, self._dp, self.device._state.ctx, src._dp, src.device._state.ctx, self.nbytes, s._h)
        except IronAccelError:
            raise
        except TypeError:
            raise self._diagnose(op, s) from None
        if sync:
            _hot.stream_sync(s._h)

    def _stream_for(self, stream: Stream | None, op: str) -> tuple[Stream, bool]:
        if self.ptr is None:
            raise closed(op, "buffer")
        if stream is None:
            return self._stream, True
        if getattr(stream, "_ordinal", None) != self._ordinal:
            raise self._copy_mismatch(op, None, stream)
        if stream._h is CLOSED:
            raise closed(op, "stream")
        return stream, False

    # -- interop ------------------------------------------------------------

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA Array Interface v3: 1-D, the home stream as the synchronisation stream."""
        if self.ptr is None:
            raise closed("__cuda_array_interface__", "buffer")
        return {
            "shape": (self.size,),
            "typestr": self._npdt.str,
            "data": (self.ptr, False),
            "version": 3,
            "strides": None,
            "stream": self._stream_int(),
        }

    def __dlpack_device__(self) -> tuple[int, int]:
        from ._dlpack import KDL_CUDA

        return (KDL_CUDA, self._ordinal)

    def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A DLPack capsule; the consumer's `stream` is ordered after this buffer's home stream."""
        from . import _dlpack

        op = "__dlpack__"
        if self.ptr is None:
            raise closed(op, "buffer")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"cuda: {op}: cannot export to device {dl_device}; the buffer is on cuda:{self._ordinal}")
        if copy:
            raise BufferError(f"cuda: {op}: copy=True is not supported; copy explicitly with copy_to_host()")
        if stream == 0:
            raise invalid(op, "stream 0 is ambiguous in DLPack; pass 1 (legacy default), 2 (per-thread) or a handle")
        if stream is not None and stream != -1:
            self._order_consumer(stream)
        elif stream is None:
            self._order_consumer(1)
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        return _dlpack.export(self.ptr, self.size, self.dtype, (_dlpack.KDL_CUDA, self._ordinal), self, versioned)

    def _order_consumer(self, consumer: int) -> None:
        home = self._stream_int()
        if consumer == home:
            return
        dev = self.device
        event = dev.create_event()
        try:
            event.record(self._stream)
            _hot.stream_wait(_hot.stream_handle(consumer), event._h)
        finally:
            event.close()

    def _stream_int(self) -> int:
        h = self._stream._h
        if h is CLOSED:
            h = self.device._state.default_stream._h
        return _hot.to_int(h)

    @classmethod
    def from_foreign(cls, obj: Any) -> DeviceBuf:
        """A non-owning 1-D view of a CuPy, PyTorch, cuda.core, Numba or JAX device array.

        Uses `__cuda_array_interface__` when present, else DLPack.  The view
        keeps `obj` alive; the array must be contiguous and non-empty.  Work
        pending on the producer's stream is waited for.
        """
        from .device import Device

        op = "DeviceBuf.from_foreign"
        if isinstance(obj, DeviceBuf):
            return obj[:]
        cai = getattr(obj, "__cuda_array_interface__", None)
        if cai is not None:
            return cls._from_cai(obj, cai)
        if not hasattr(obj, "__dlpack__"):
            raise invalid(op, f"{type(obj).__name__} speaks neither __cuda_array_interface__ nor __dlpack__")
        from . import _dlpack

        dev_type, dev_id = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (_dlpack.KDL_CUDA, 0)
        if dev_type not in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED):
            raise invalid(op, f"the array lives on DLPack device type {dev_type}, not a CUDA device")
        device = Device(int(dev_id))
        consumer = _hot.to_int(device._state.default_stream._h)
        try:
            capsule = obj.__dlpack__(stream=consumer, max_version=(1, 0))
        except TypeError:
            capsule = obj.__dlpack__(stream=consumer)
        try:
            imported = _dlpack.consume(capsule)
        except TypeError as exc:
            raise invalid(op, str(exc)) from None
        if not imported.contiguous or not imported.shape or 0 in imported.shape:
            imported.release()
            raise invalid(op, f"the array must be contiguous and non-empty (shape {imported.shape}, "
                          f"strides {imported.strides})")
        size = int(np.prod(imported.shape))
        default = device._state.default_stream
        return DeviceBuf._wrap(_hot.devptr(imported.ptr), size, imported.dtype, _np_dtype(imported.dtype), device,
                               default, _hot.RELEASE_IMPORTED, base=(obj, imported))

    @classmethod
    def _from_cai(cls, obj: Any, cai: dict[str, Any]) -> DeviceBuf:
        from ._driver import call, driver
        from .device import Device

        op = "DeviceBuf.from_foreign"
        ptr = int(cai["data"][0])
        shape = tuple(int(x) for x in cai["shape"])
        npdt = np.dtype(cai["typestr"])
        try:
            dtype = DType.of(npdt)
        except TypeError as exc:
            raise invalid(op, str(exc)) from None
        size = int(np.prod(shape)) if shape else 1
        strides = cai.get("strides")
        if strides is not None:
            expected = npdt.itemsize
            for extent, stride in zip(reversed(shape), reversed(strides)):
                if extent != 1 and stride != expected:
                    raise invalid(op, f"the array is not C-contiguous (shape {shape}, strides {tuple(strides)})")
                expected *= extent
        if size == 0 or ptr == 0:
            raise invalid(op, "the array is empty")
        attr = driver().CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        ordinal = int(call("cuPointerGetAttribute", attr, ptr))
        device = Device(ordinal)
        stream = cai.get("stream")
        if stream:  # v3: wait for the producer's pending work on that stream
            _hot.stream_sync(_hot.stream_handle(int(stream)))
        default = device._state.default_stream
        return DeviceBuf._wrap(_hot.devptr(ptr), size, dtype, npdt, device, default, None, base=obj)

    # -- misc ---------------------------------------------------------------

    def __repr__(self) -> str:
        state = "closed" if self.ptr is None else hex(self.ptr)
        return f"<DeviceBuf {state} {self.size} x {self.dtype.value} on cuda:{self._ordinal}>"

    # -- cold diagnostics -----------------------------------------------------

    def _copy_mismatch(self, op: str, arr: Any, s: Any, to_host: bool = False) -> Exception:
        from .stream import Stream

        if self.ptr is None:
            return closed(op, "buffer")
        if not isinstance(s, Stream):
            return invalid(op, f"stream must be a Stream, got {type(s).__name__}")
        if s._ordinal != self._ordinal:
            return invalid(op, f"the stream is on cuda:{s._ordinal} but the buffer is on cuda:{self._ordinal}")
        if arr is None:
            return invalid(op, "bad arguments")
        if not isinstance(arr, np.ndarray):
            return invalid(op, f"out must be a numpy array, got {type(arr).__name__}")
        if arr.dtype != self._npdt:
            return invalid(op, f"dtype mismatch: array is {arr.dtype}, buffer is {self.dtype.value}")
        if arr.nbytes != self.nbytes:
            return invalid(op, f"size mismatch: array has {arr.nbytes} bytes, buffer {self.nbytes}")
        if not arr.flags.c_contiguous:
            return invalid(op, "the host array is not C-contiguous (use np.ascontiguousarray)")
        if to_host and not arr.flags.writeable:
            return invalid(op, "out is read-only")
        return invalid(op, "bad arguments")

    def _diagnose(self, op: str, s: Any, arr: Any = None, exc: Exception | None = None) -> Exception:
        from .stream import Stream

        if self.ptr is None:
            return closed(op, "buffer")
        if not isinstance(s, Stream):
            return invalid(op, f"stream must be a Stream, got {type(s).__name__}")
        if s._h is CLOSED:
            return closed(op, "stream")
        if arr is not None and isinstance(arr, np.ndarray) and not arr.flags.c_contiguous:
            return invalid(op, "the host array is not contiguous (use np.ascontiguousarray)")
        if self._base is not None and getattr(self._base, "ptr", 0) is None:
            return closed(op, "parent buffer")
        return invalid(op, f"{type(exc).__name__}: {exc}" if exc else "bad arguments")


DeviceBuf = _hot.buffer_class(DeviceBufMethods)
"""Typed device memory: `ptr` is the device address (None once closed); see DeviceBufMethods."""


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
        return DeviceBuf._wrap(_hot.devptr(ptr), size, dt, npdt, device, home, None, base=keepalive)
    return DeviceBuf._wrap(_hot.devptr(ptr), size, dt, npdt, device, home, _hot.RELEASE_IMPORTED,
                           base=(keepalive, _ReleaseOnce(release)))


# -- pinned host memory -------------------------------------------------------


CU_MEMHOSTALLOC_PORTABLE = 0x1
CU_MEMHOSTALLOC_DEVICEMAP = 0x2
CU_MEMHOSTALLOC_WRITECOMBINED = 0x4


class _HostArrayOwner:
    """Exposes pinned memory to numpy and keeps its PinnedBuf alive while arrays exist."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, ptr: int, size: int, npdt: np.dtype, owner: PinnedBuf):
        self.__array_interface__ = {"shape": (size,), "typestr": npdt.str, "data": (ptr, False), "version": 3}
        self.owner = owner


class PinnedBuf:
    """Page-locked host memory, usable as a numpy array (`.array`) and for fast async copies.

    Allocate with `dev.alloc_pinned(size, dtype, mapped=, write_combined=,
    portable=)`; those flags are readable here.  `close()` frees it now
    (idempotent): arrays taken from `.array`, and device views of it
    (`dev.device_view`), must not be used afterwards.
    """

    __slots__ = ("ptr", "nbytes", "size", "dtype", "device", "_array", "_flags", "__weakref__")
    ptr: int | None
    nbytes: int
    size: int
    dtype: DType
    device: Device
    _array: np.ndarray | None
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
        p._array = np.asarray(_HostArrayOwner(ptr, size, npdt, p))
        _hot.pinned_add(ptr, p.nbytes)
        return p

    @property
    def mapped(self) -> bool:
        """The device can address this memory (`dev.device_view(p.array)`)."""
        return bool(self._flags & CU_MEMHOSTALLOC_DEVICEMAP)

    @property
    def write_combined(self) -> bool:
        return bool(self._flags & CU_MEMHOSTALLOC_WRITECOMBINED)

    @property
    def portable(self) -> bool:
        return bool(self._flags & CU_MEMHOSTALLOC_PORTABLE)

    @property
    def array(self) -> np.ndarray:
        if self.ptr is None or self._array is None:
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
            _hot.pinned_remove(ptr)
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
CU_MEMHOSTREGISTER_DEVICEMAP = 0x2
CU_MEMHOSTREGISTER_READ_ONLY = 0x8


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
    from ._driver import call
    from .device import Device

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
    dev = device if device is not None else Device(0)
    if read_only:
        from .driver_pool import device_attribute
        from .errors import Unsupported

        if not device_attribute(dev, "READ_ONLY_HOST_REGISTER_SUPPORTED"):
            raise Unsupported("cuda", op, f"cuda:{dev.ordinal} cannot register host memory read-only")
    if mapped and not dev.attributes.can_map_host_memory:
        from .errors import Unsupported

        raise Unsupported("cuda", op, f"cuda:{dev.ordinal} cannot map host memory")
    flags = ((CU_MEMHOSTREGISTER_PORTABLE if portable else 0) | (CU_MEMHOSTREGISTER_DEVICEMAP if mapped else 0)
             | (CU_MEMHOSTREGISTER_READ_ONLY if read_only else 0))
    dev._bind_here()
    ptr = array.ctypes.data
    call(op, ptr, array.nbytes, flags)
    _hot.pinned_add(ptr, array.nbytes)
    try:
        yield array
    finally:
        _hot.pinned_remove(ptr)
        dev._bind_here()
        call("cuMemHostUnregister", ptr)

