"""Pitched device memory and 2-D / 3-D copies (cuMemAllocPitch, cuMemcpy2DAsync, cuMemcpy3DAsync).

    img = dev.alloc_pitched((1080, 1920), "uint8")      # rows padded to img.pitch bytes
    img.copy_from(frame)                                # a 2-D numpy array; rows may be strided (frame[::2])
    out = img.copy_to_host()                            # (1080, 1920) numpy array
    vol = dev.alloc_pitched((64, 256, 256), "float32")  # 3-D: depth x rows x columns
    packed = cu.PitchedBuf.view_of(linear_buf, (64, 256, 256))   # a plain DeviceBuf, rows back to back
    packed.copy_from(vol)                               # device to device, pitch to packed

A `PitchedBuf` is a 2-D `(rows, cols)` or 3-D `(depth, rows, cols)` array of
`dtype` whose rows start `pitch` bytes apart (a 3-D slice is `rows * pitch`
bytes).  `dev.alloc_pitched` lets the driver choose the pitch; `view_of`
reads any DeviceBuf as rows of a given pitch (default: packed), without
owning it.  `buffer` is the DeviceBuf underneath (kernels take it; their row
stride is `pitch`).

Copies take a numpy array or another PitchedBuf of the same shape and dtype on
the same device; a numpy array's last axis must be contiguous and its other
strides positive multiples that fit (any slice of a bigger C array does).
Every size, stride and dtype is checked before the driver.  Without `stream`
a copy is synchronous (on the home stream); with it, asynchronous (a host
array must then stay alive and unchanged until the stream reaches the copy).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from . import _core
from . import dtypes as _dtypes
from ._driver import call, driver
from .allocator import check_stream, is_devicebuf, release_after
from .errors import closed, invalid
from .memory import adopt

if TYPE_CHECKING:
    from ironaccel import DType

    from .device import Device
    from .stream import Stream

    DeviceBuf = Any  # memory.DeviceBuf is made at run time, so it cannot be a static type

__all__ = ["PitchedBuf"]

CU_MEMORYTYPE_HOST = 1
CU_MEMORYTYPE_DEVICE = 2


def _shape(shape: Any, op: str) -> tuple[int, ...]:
    if not isinstance(shape, tuple) or len(shape) not in (2, 3) or any(
        isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0 for n in shape
    ):
        raise invalid(op, f"shape must be (rows, cols) or (depth, rows, cols) of positive ints, got {shape!r}")
    return tuple(int(n) for n in shape)


class PitchedBuf:
    """Rows of device memory `pitch` bytes apart; see the module docstring."""

    buffer: Any
    device: Device
    shape: tuple[int, ...]
    dtype: DType
    pitch: int
    _owned: bool

    def __init__(self) -> None:
        raise TypeError("use Device.alloc_pitched() or PitchedBuf.view_of()")

    @classmethod
    def _make(cls, buffer: DeviceBuf, shape: tuple[int, ...], dtype: DType, pitch: int, owned: bool) -> PitchedBuf:
        pb = cls.__new__(cls)
        pb.buffer = buffer
        pb.device = buffer.device
        pb.shape = shape
        pb.dtype = dtype
        pb.pitch = pitch
        pb._owned = owned
        return pb

    @classmethod
    def _alloc(cls, device: Device, shape: Any, dtype: Any, stream: Stream | None) -> PitchedBuf:
        op = "cuMemAllocPitch"
        device._check_open(op)
        shape = _shape(shape, op)
        dt, _, itemsize = _dtypes.spec(dtype, op)
        s = check_stream(device, stream, op, same_device=True)
        width = shape[-1] * itemsize
        rows = math.prod(shape[:-1])  # exact: np.prod wraps past 2**63
        if width * rows > device.total_memory:
            raise invalid(op, f"{width * rows} bytes is more than cuda:{device.ordinal} has ({device.total_memory})")
        device._bind_here()
        ptr, pitch = call(op, width, rows, min(16, max(4, itemsize)))
        ptr, pitch = int(ptr), int(pitch)
        buf = adopt(ptr, pitch * rows, "uint8", device, stream=s, release=_PitchFree(device, ptr, s))
        return cls._make(buf, shape, dt, pitch, True)

    @classmethod
    def view_of(cls, buf: DeviceBuf, shape: Any, pitch: int | None = None) -> PitchedBuf:
        """`buf` read as rows `pitch` bytes apart (default: packed rows) of `buf`'s dtype; it is not owned."""
        op = "PitchedBuf.view_of"
        if not is_devicebuf(buf):
            raise invalid(op, f"expected a DeviceBuf, got {type(buf).__name__}")
        if buf.ptr is None:
            raise closed(op, "buffer")
        shape = _shape(shape, op)
        itemsize = buf.dtype.numpy.itemsize
        width = shape[-1] * itemsize
        if pitch is None:
            pitch = width
        if isinstance(pitch, bool) or not isinstance(pitch, int) or pitch < width:
            raise invalid(op, f"pitch must be an int of at least one row ({width} bytes), got {pitch!r}")
        rows = math.prod(shape[:-1])  # exact: np.prod wraps past 2**63
        need = pitch * (rows - 1) + width
        if need > buf.nbytes:
            raise invalid(op, f"{shape} rows {pitch} bytes apart need {need} bytes; the buffer has {buf.nbytes}")
        return cls._make(buf, shape, buf.dtype, pitch, False)

    # -- properties ---------------------------------------------------------------

    @property
    def ptr(self) -> int:
        """The device address of the first row; ClosedError once the buffer is closed."""
        if self.buffer.ptr is None:
            raise closed("PitchedBuf.ptr", "pitched buffer")
        return self.buffer.ptr

    @property
    def nbytes(self) -> int:
        """Bytes spanned, padding included: pitch * rows * depth."""
        return self.pitch * math.prod(self.shape[:-1])

    @property
    def closed(self) -> bool:
        """Whether the underlying buffer was closed."""
        return self.buffer.ptr is None

    # -- copies -----------------------------------------------------------------

    def copy_from(self, src: Any, stream: Stream | None = None) -> None:
        """Copy a numpy array or a PitchedBuf of the same shape and dtype into this buffer."""
        op = "cuMemcpy3DAsync" if len(self.shape) == 3 else "cuMemcpy2DAsync"
        if self.closed:
            raise closed(op, "pitched buffer")
        if isinstance(src, np.ndarray):
            side = _host_side(src, self.shape, self.dtype, op, writeable=False)
        elif isinstance(src, PitchedBuf):
            if src.closed:
                raise closed(op, "source pitched buffer")
            if src.shape != self.shape or src.dtype is not self.dtype:
                raise invalid(op, f"source is {src.shape} x {src.dtype.value}, destination {self.shape} x "
                              f"{self.dtype.value}; shapes and dtypes must match")
            if src.device.ordinal != self.device.ordinal:
                raise invalid(op, f"the source is on cuda:{src.device.ordinal}, the destination on "
                              f"cuda:{self.device.ordinal}: 2-D and 3-D copies stay on one device")
            side = src._side()
        else:
            raise invalid(op, f"cannot copy from {type(src).__name__}; pass a numpy array or a PitchedBuf (wrap a "
                          "DeviceBuf with PitchedBuf.view_of)")
        self._copy(self._side(), side, stream, op)

    def copy_to_host(self, out: np.ndarray | None = None, stream: Stream | None = None) -> np.ndarray:
        """Copy into a new C-contiguous array of `shape`, or into `out`; returns the array."""
        op = "cuMemcpy3DAsync" if len(self.shape) == 3 else "cuMemcpy2DAsync"
        if self.closed:
            raise closed(op, "pitched buffer")
        if out is None:
            out = np.empty(self.shape, self.dtype.numpy)
        elif not isinstance(out, np.ndarray):
            raise invalid(op, f"out must be a numpy array, got {type(out).__name__}")
        side = _host_side(out, self.shape, self.dtype, op, writeable=True)
        self._copy(side, self._side(), stream, op)
        return out

    def _side(self) -> tuple[int, int, int, int]:
        rows = self.shape[-2]
        return (CU_MEMORYTYPE_DEVICE, self.ptr, self.pitch, rows)

    def _copy(self, dst: tuple[int, int, int, int], src: tuple[int, int, int, int], stream: Any, op: str) -> None:
        if self.closed:
            raise closed(op, "pitched buffer")
        self.device._check_open(op)
        if stream is None:  # the buffer's home stream (the default stream once that is closed)
            h, sync = int(self.buffer.__cuda_array_interface__["stream"]), True
        else:
            s = check_stream(self.device, stream, op)
            ordinal = cast(Any, s).device.ordinal
            if ordinal != self.device.ordinal:
                raise invalid(op, f"the stream is on cuda:{ordinal}, the buffer on cuda:{self.device.ordinal}")
            h, sync = s._h, False
        drv = driver()
        width = self.shape[-1] * self.dtype.numpy.itemsize
        if len(self.shape) == 2:
            p: Any = drv.CUDA_MEMCPY2D()
        else:
            p = drv.CUDA_MEMCPY3D()
            p.Depth = self.shape[0]
            p.srcHeight, p.dstHeight = src[3], dst[3]
        p.WidthInBytes = width
        p.Height = self.shape[-2]
        for prefix, (kind, addr, pitch, _) in (("src", src), ("dst", dst)):
            setattr(p, prefix + "MemoryType", drv.CUmemorytype(kind))
            setattr(p, prefix + ("Host" if kind == CU_MEMORYTYPE_HOST else "Device"), addr)
            setattr(p, prefix + "Pitch", pitch)
        self.device._bind_here()
        call(op, p, h)
        if sync:
            _core.stream_sync(h)

    # -- lifetime -------------------------------------------------------------------

    def close(self) -> None:
        """Free the memory (owned buffers) or forget the view.  Idempotent."""
        if self._owned:
            self.buffer.close()
        else:
            self.buffer = _Closed()

    def __enter__(self) -> PitchedBuf:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else hex(self.ptr)
        return (f"<PitchedBuf {state} {self.shape} x {self.dtype.value}, pitch {self.pitch} "
                f"on cuda:{self.device.ordinal}>")


class _Closed:
    ptr = None


def _host_side(arr: np.ndarray, shape: tuple[int, ...], dtype: DType, op: str,
               writeable: bool) -> tuple[int, int, int, int]:
    """(memory type, address, row pitch, rows per slice) of a host array, checked against `shape` and `dtype`."""
    if arr.shape != shape:
        raise invalid(op, f"the array has shape {arr.shape}, the buffer {shape}")
    if arr.dtype != dtype.numpy:
        raise invalid(op, f"dtype mismatch: the array is {arr.dtype}, the buffer {dtype.value}")
    if writeable and not arr.flags.writeable:
        raise invalid(op, "out is read-only")
    itemsize = arr.itemsize
    strides = arr.strides
    if strides[-1] != itemsize:
        raise invalid(op, f"the array's rows must be contiguous (last stride {strides[-1]}, item size {itemsize})")
    row = strides[-2]
    if row < shape[-1] * itemsize and shape[-2] > 1:
        raise invalid(op, f"the array's row stride {row} is shorter than a row ({shape[-1] * itemsize} bytes)")
    row = max(row, shape[-1] * itemsize)
    rows = shape[-2]
    if len(shape) == 3:
        plane = strides[0]
        if shape[0] > 1 and (plane <= 0 or plane % row or plane // row < shape[1]):
            raise invalid(op, f"the array's slice stride {plane} is not a whole number (>= {shape[1]}) of rows "
                          f"{row} bytes apart")
        rows = plane // row if shape[0] > 1 else shape[1]
    return (CU_MEMORYTYPE_HOST, arr.ctypes.data, row, rows)


class _PitchFree:
    __slots__ = ("device", "ptr", "stream")

    def __init__(self, device: Device, ptr: int, stream: Stream):
        self.device, self.ptr, self.stream = device, ptr, stream

    def __call__(self) -> None:
        release_after(self.device, self.stream, "cuMemFree", self.ptr)
