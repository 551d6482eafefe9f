"""CUDA arrays, texture objects and surface objects (cuArray3DCreate, cuTexObjectCreate, cuSurfObjectCreate).

    img = dev.create_array((480, 640), "float32")              # 480 rows of 640 texels, in the GPU's texture layout
    img.copy_from(frame)                                        # a (480, 640) float32 numpy array, or device memory
    tex = dev.create_texture(img, filter_mode="linear", normalized_coords=True, address_mode="wrap")
    fn.launch(grid, block, out, tex.handle)                     # a cudaTextureObject_t kernel parameter
    rgba = dev.create_array((64, 64), "uint8", channels=4, surface=True)
    surf = dev.create_surface(rgba)                             # surf2Dwrite / surf2Dread in kernels
    lin = dev.create_texture(buf)                               # tex1Dfetch over a DeviceBuf (linear memory)
    pit = dev.create_texture(dev.alloc_pitched((480, 640), "float32"))   # tex2D over pitched rows

An `Array` is memory in the GPU's own texture layout: kernels reach it only
through a texture object (cached, filtered, addressed reads: `tex1D`,
`tex2D`, `tex3D`, `tex2DLayered`, `texCubemap`, ...) or a surface object
(`surf2Dread` / `surf2Dwrite`, ...), never through a pointer.  Its `shape` is
the extent in numpy order -- `(width,)`, `(height, width)` or `(depth,
height, width)`; with `layered=True` the first axis counts layers, `(layers,
width)` or `(layers, height, width)`; a cubemap is `(6, width, width)`
(`(6 * n, width, width)` layered).  Each texel holds `channels` values (1, 2
or 4, as the driver allows) of `dtype`: uint8, uint16, uint32, int8, int16,
int32, float16 or float32.  Host arrays given to or made by copies have
`host_shape`: `shape`, plus a last axis of `channels` when there is more than
one.  `surface=True` is needed for surface objects; `texture_gather=True`
(2-D only) for `tex2Dgather`.

Copies (cuMemcpy3DAsync) take a numpy array of `host_shape` and `dtype`
(rows, slices and texels may be strided as for `PitchedBuf`, but each row's
values must be contiguous), a `DeviceBuf` of the same dtype and byte size
(rows back to back), a `PitchedBuf` of the same rows, or another `Array` of
the same shape, dtype and channels, on the same device.  Without `stream` a
copy is synchronous, on the array's home stream; with it, asynchronous (a
host array must then stay alive and unchanged until the stream reaches the
copy).

A `TextureObject` reads an Array, a DeviceBuf (linear memory: `tex1Dfetch`
by element index, no filtering or addressing) or a 2-D PitchedBuf (`tex2D`
over pitched rows).  `address_mode` is "clamp" (default), "border" (reads
outside give `border_color`), "wrap" or "mirror" (those two need
`normalized_coords=True`), one for every dimension or one per dimension in
the order x (along the last axis), y, z.  `filter_mode` is "point" or
"linear" (interpolated reads, which return floats: float16/float32 data, or
8- and 16-bit integers read as "normalized_float").  `read_mode` "element"
returns the stored type; "normalized_float" maps 8- and 16-bit integers to
[0, 1] (unsigned) or [-1, 1] (signed).  Its `handle` is the 64-bit
CUtexObject: pass it as the kernel's `cudaTextureObject_t` argument.  A
`SurfaceObject` reads and writes an Array made with `surface=True`; its
`handle` is the `cudaSurfaceObject_t`.

Every shape, flag, dtype, mode and alignment is checked before the driver
(InvalidArgument naming the driver call).  Closing an array closes its
texture and surface objects first; each closes after the work queued on its
home stream (the array's, or the buffer's) -- kernels on other streams must
be waited for before closing, as for buffers.  A texture keeps the buffer it
reads alive, but closing that buffer frees the memory: close the texture
first.
"""

from __future__ import annotations

import math
import sys
import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from . import _core
from . import dtypes as _dtypes
from ._driver import call, driver
from .allocator import check_stream, is_devicebuf, release_after
from .driver_pool import device_attribute
from .errors import closed, invalid
from .pitched import CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST, PitchedBuf, _host_side

if TYPE_CHECKING:
    from ironaccel import DType

    from .device import Device
    from .stream import Stream

__all__ = ["Array", "TextureObject", "SurfaceObject"]

CU_MEMORYTYPE_ARRAY = 3
CUDA_ARRAY3D_LAYERED = 0x01
CUDA_ARRAY3D_SURFACE_LDST = 0x02
CUDA_ARRAY3D_CUBEMAP = 0x04
CUDA_ARRAY3D_TEXTURE_GATHER = 0x08
CU_TRSF_READ_AS_INTEGER = 0x01
CU_TRSF_NORMALIZED_COORDINATES = 0x02
CU_RESOURCE_TYPE_ARRAY = 0x00
CU_RESOURCE_TYPE_LINEAR = 0x02
CU_RESOURCE_TYPE_PITCH2D = 0x03

# numpy element type -> CUarray_format
_FORMATS = {
    np.dtype(np.uint8): 0x01, np.dtype(np.uint16): 0x02, np.dtype(np.uint32): 0x03,
    np.dtype(np.int8): 0x08, np.dtype(np.int16): 0x09, np.dtype(np.int32): 0x0A,
    np.dtype(np.float16): 0x10, np.dtype(np.float32): 0x20,
}
_CHANNELS = (1, 2, 4)
_ADDRESS_MODES = {"wrap": 0, "clamp": 1, "mirror": 2, "border": 3}
_FILTER_MODES = {"point": 0, "linear": 1}
_READ_MODES = ("element", "normalized_float")


def _format(dtype: Any, op: str) -> tuple[DType, int]:
    """(DType, CUarray_format) of `dtype`; InvalidArgument naming `op` for anything a CUDA array cannot hold."""
    dt, npdt, _ = _dtypes.spec(dtype, op)
    fmt = _FORMATS.get(npdt)
    if fmt is None:
        names = ", ".join(str(d) for d in _FORMATS)
        raise invalid(op, f"CUDA arrays and textures hold {names}; got {dt.value}")
    return dt, fmt


def _channels(channels: Any, op: str) -> int:
    if isinstance(channels, bool) or not isinstance(channels, (int, np.integer)) or int(channels) not in _CHANNELS:
        raise invalid(op, f"channels must be 1, 2 or 4 (the driver has no 3-channel texels: use 4), got {channels!r}")
    return int(channels)


def _flag(name: str, value: Any, op: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(op, f"{name} must be a bool, got {value!r}")
    return value


def _extent(shape: Any, layered: bool, cubemap: bool, gather: bool, op: str) -> tuple[int, int, int]:
    """The driver's (Width, Height, Depth) of a shape in numpy order; 0 where the descriptor says "none"."""
    if not isinstance(shape, tuple) or len(shape) not in (1, 2, 3) or any(
        isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0 for n in shape
    ):
        raise invalid(op, f"shape must be (width,), (height, width) or (depth, height, width) of positive ints, "
                      f"got {shape!r}")
    dims = tuple(int(n) for n in shape)
    if cubemap:
        if len(dims) != 3 or dims[1] != dims[2]:
            raise invalid(op, f"a cubemap's shape is (6, width, width) (layered: (6 * layers, width, width)), "
                          f"got {shape!r}")
        if (dims[0] % 6 if layered else dims[0] != 6):
            raise invalid(op, f"a cubemap has 6 faces{' per layer' if layered else ''}, got {dims[0]}")
    elif layered and len(dims) == 1:
        raise invalid(op, f"a layered array's shape is (layers, width) or (layers, height, width), got {shape!r}")
    if gather and (len(dims) != 2 or layered or cubemap):
        raise invalid(op, f"texture_gather needs a 2-D array, (height, width), not layered; got {shape!r}"
                      f"{' layered' if layered else ''}{' cubemap' if cubemap else ''}")
    if layered and not cubemap and len(dims) == 2:  # (layers, width): a 1-D layered array has no height
        return dims[1], 0, dims[0]
    width = dims[-1]
    height = dims[-2] if len(dims) >= 2 else 0
    depth = dims[0] if len(dims) == 3 else 0
    return width, height, depth


_C = TypeVar("_C", bound="_Closing")


class _Closing:
    """What Array, TextureObject and SurfaceObject share: a driver handle `_h` (None once closed), `close()` as a
    context manager, and `close()` on collection, where a failure is said, not swallowed (what it held may be
    left behind)."""

    _h: Any

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_h", None) is None:
            return
        try:
            self.close()
        except Exception as exc:
            if not sys.is_finalizing():
                warnings.warn(f"{type(self).__name__}: destroying it on collection failed: {exc}", RuntimeWarning,
                              stacklevel=2)


class _Object(_Closing):
    """What TextureObject and SurfaceObject share: a 64-bit object handle destroyed after the home stream's work
    by `_destroy` (cuTexObjectDestroy, cuSurfObjectDestroy); `_what` names it in errors."""

    device: Device
    _stream: Stream
    _what: str
    _destroy: str

    @property
    def handle(self) -> int:
        """The 64-bit object handle: the kernel's `cudaTextureObject_t` / `cudaSurfaceObject_t` argument (pass it
        to `launch` as an int)."""
        if self._h is None:
            raise closed(f"{type(self).__name__}.handle", self._what)
        return int(self._h)

    @property
    def closed(self) -> bool:
        """Whether `close()` destroyed the object (or its array was closed)."""
        return self._h is None

    def close(self) -> None:
        """Destroy the object after its home stream's work.  Idempotent."""
        h, self._h = self._h, None
        if h is not None:
            release_after(self.device, self._stream, self._destroy, h)


class Array(_Closing):
    """A CUDA array (texture memory in the GPU's own layout), read by textures and written by surfaces.

    Made by `Device.create_array`; see the module docstring.
    """

    device: Device
    shape: tuple[int, ...]
    dtype: DType
    channels: int
    surface: bool
    layered: bool
    cubemap: bool
    texture_gather: bool
    _h: Any
    _stream: Stream
    _extent: tuple[int, int, int]  # copy box: bytes per row, rows per slice, slices
    _objects: list[weakref.ref[Any]]  # its texture and surface objects, closed with it
    _lock: threading.Lock

    def __init__(self) -> None:
        raise TypeError("use Device.create_array()")

    @classmethod
    def _create(cls, device: Device, shape: Any, dtype: Any, channels: Any, *, surface: bool, layered: bool,
                cubemap: bool, texture_gather: bool, stream: Stream | None) -> Array:
        op = "cuArray3DCreate"
        device._check_open(op)
        dt, fmt = _format(dtype, op)
        nch = _channels(channels, op)
        flags = 0
        for name, value, bit in (("surface", surface, CUDA_ARRAY3D_SURFACE_LDST), ("layered", layered,
                                 CUDA_ARRAY3D_LAYERED), ("cubemap", cubemap, CUDA_ARRAY3D_CUBEMAP),
                                 ("texture_gather", texture_gather, CUDA_ARRAY3D_TEXTURE_GATHER)):
            if _flag(name, value, op):
                flags |= bit
        width, height, depth = _extent(shape, layered, cubemap, texture_gather, op)
        s = check_stream(device, stream, op, same_device=True)
        itemsize = dt.numpy.itemsize
        nbytes = width * max(height, 1) * max(depth, 1) * nch * itemsize
        if nbytes > device.total_memory:
            raise invalid(op, f"{nbytes} bytes is more than cuda:{device.ordinal} has ({device.total_memory})")
        drv = driver()
        desc = drv.CUDA_ARRAY3D_DESCRIPTOR()
        desc.Width, desc.Height, desc.Depth = width, height, depth
        desc.Format = drv.CUarray_format(fmt)
        desc.NumChannels = nch
        desc.Flags = flags
        device._bind_here()
        h = call(op, desc)
        arr = cls.__new__(cls)
        arr.device = device
        arr.shape = tuple(int(n) for n in shape)
        arr.dtype = dt
        arr.channels = nch
        arr.surface, arr.layered, arr.cubemap, arr.texture_gather = surface, layered, cubemap, texture_gather
        arr._h = h
        arr._stream = s
        arr._extent = (width * nch * itemsize, max(height, 1), max(depth, 1))
        arr._objects = []
        arr._lock = threading.Lock()
        return arr

    # -- properties ---------------------------------------------------------------

    @property
    def handle(self) -> int:
        """The CUarray address, for other libraries that take a raw array."""
        if self._h is None:
            raise closed("Array.handle", "array")
        return int(self._h)

    @property
    def host_shape(self) -> tuple[int, ...]:
        """The shape of host arrays that copies take and make: `shape`, plus `channels` when more than one."""
        return self.shape if self.channels == 1 else (*self.shape, self.channels)

    @property
    def nbytes(self) -> int:
        """Bytes of data the array holds (texels x channels x item size; the driver's layout may take more)."""
        return self._extent[0] * self._extent[1] * self._extent[2]

    @property
    def closed(self) -> bool:
        """Whether `close()` destroyed the array (later calls on it raise ClosedError)."""
        return self._h is None

    # -- copies -------------------------------------------------------------------

    def copy_from(self, src: Any, stream: Stream | None = None) -> None:
        """Copy a numpy array, DeviceBuf, PitchedBuf or Array of the same layout into this array (cuMemcpy3DAsync)."""
        op = "cuMemcpy3DAsync"
        self._check(op)
        if isinstance(src, np.ndarray):
            side = self._host(src, op, writeable=False)
        else:
            side = self._device_side(src, op, "source")
        self._copy(self._side(), side, stream, op)

    def copy_to(self, dst: Any = None, stream: Stream | None = None) -> Any:
        """Copy this array into `dst` (a numpy array, DeviceBuf, PitchedBuf or Array of the same layout), or into a
        new numpy array of `host_shape` when `dst` is None; returns `dst` (cuMemcpy3DAsync)."""
        op = "cuMemcpy3DAsync"
        self._check(op)
        if dst is None:
            dst = np.empty(self.host_shape, self.dtype.numpy)
        if isinstance(dst, np.ndarray):
            side = self._host(dst, op, writeable=True)
        else:
            side = self._device_side(dst, op, "destination")
        self._copy(side, self._side(), stream, op)
        return dst

    def copy_to_host(self, out: np.ndarray | None = None, stream: Stream | None = None) -> np.ndarray:
        """Copy into a new numpy array of `host_shape`, or into `out`; returns the array."""
        op = "cuMemcpy3DAsync"
        self._check(op)
        if out is not None and not isinstance(out, np.ndarray):
            raise invalid(op, f"out must be a numpy array, got {type(out).__name__}")
        result: np.ndarray = self.copy_to(out, stream)
        return result

    def _check(self, op: str) -> None:
        if self._h is None:
            raise closed(op, "array")

    def _side(self) -> tuple[int, Any, int, int]:
        return (CU_MEMORYTYPE_ARRAY, self._h, 0, 0)

    def _host(self, arr: np.ndarray, op: str, writeable: bool) -> tuple[int, Any, int, int]:
        """The host side of a copy: `arr` checked against `host_shape` and `dtype`, read as rows of values."""
        if arr.shape != self.host_shape:
            raise invalid(op, f"the host array has shape {arr.shape}, the CUDA array {self.host_shape} "
                          f"({self.shape} x {self.channels} channel(s))")
        if arr.dtype != self.dtype.numpy:
            raise invalid(op, f"dtype mismatch: the host array is {arr.dtype}, the CUDA array {self.dtype.value}")
        itemsize = arr.itemsize
        strides = arr.strides
        if self.channels > 1:  # fold the channels into the row: a row is width x channels values
            if strides[-1] != itemsize or strides[-2] != self.channels * itemsize:
                raise invalid(op, f"each row's texels must be contiguous in the host array (strides {strides}, "
                              f"{self.channels} channels of {itemsize} bytes)")
            strides = (*strides[:-2], itemsize)
        row_bytes, rows, slices = self._extent
        lead = strides[:-1]  # the axes before the values: (slices, rows), (rows,), (slices,) when layered 1-D, ()
        if len(lead) == 2:
            plane, row = lead
        elif len(lead) == 1:
            plane, row = (lead[0], lead[0]) if rows == 1 else (rows * lead[0], lead[0])
        else:
            plane, row = row_bytes, row_bytes
        values = row_bytes // itemsize
        shape3 = (slices, rows, values) if slices > 1 else (rows, values)
        view = np.lib.stride_tricks.as_strided(arr, shape3, ((plane,) if slices > 1 else ()) + (row, strides[-1]),
                                               writeable=arr.flags.writeable)
        return _host_side(view, shape3, self.dtype, op, writeable)

    def _device_side(self, other: Any, op: str, what: str) -> tuple[int, Any, int, int]:
        """The device side of a copy: a DeviceBuf (packed rows), a PitchedBuf or an Array, checked against this one."""
        row_bytes, rows, slices = self._extent
        if isinstance(other, Array):
            if other._h is None:
                raise closed(op, f"{what} array")
            if (other.shape, other.dtype, other.channels, other.layered, other.cubemap) != (
                    self.shape, self.dtype, self.channels, self.layered, self.cubemap):
                raise invalid(op, f"the {what} array is {other.shape} x {other.channels} x {other.dtype.value}, this "
                              f"one {self.shape} x {self.channels} x {self.dtype.value}; they must match")
            ordinal = other.device.ordinal
            side: tuple[int, Any, int, int] = other._side()
        elif isinstance(other, PitchedBuf):
            if other.closed:
                raise closed(op, f"{what} pitched buffer")
            values = row_bytes // self.dtype.numpy.itemsize
            want = (rows, values) if slices == 1 else (slices, rows, values)
            have = other.shape[1:] if len(other.shape) == 3 and other.shape[0] == 1 and slices == 1 else other.shape
            if other.dtype is not self.dtype or have != want:
                raise invalid(op, f"the {what} is {other.shape} x {other.dtype.value}; this array's rows are {want} x "
                              f"{self.dtype.value} (width x channels values per row)")
            ordinal = other.device.ordinal
            side = other._side()
        elif is_devicebuf(other):
            if other.ptr is None:
                raise closed(op, f"{what} buffer")
            if other.dtype is not self.dtype or other.nbytes != self.nbytes:
                raise invalid(op, f"the {what} buffer is {other.size} x {other.dtype.value} ({other.nbytes} bytes), "
                              f"this array {self.nbytes} bytes of {self.dtype.value}; dtypes and sizes must match")
            ordinal = other.device.ordinal
            side = (CU_MEMORYTYPE_DEVICE, other.ptr, row_bytes, rows)
        else:
            raise invalid(op, f"cannot copy with {type(other).__name__}; pass a numpy array, DeviceBuf, PitchedBuf "
                          "or Array")
        if ordinal != self.device.ordinal:
            raise invalid(op, f"the {what} is on cuda:{ordinal}, the array on cuda:{self.device.ordinal}: copies "
                          "with arrays stay on one device")
        return side

    def _copy(self, dst: tuple[int, Any, int, int], src: tuple[int, Any, int, int], stream: Any, op: str) -> None:
        self.device._check_open(op)
        if stream is None:  # the home stream (the default stream once that is closed)
            h = self._stream._h
            h, sync = (self.device.default_stream._h if h is _core.CLOSED else h), True
        else:
            s = check_stream(self.device, stream, op)
            if s._ordinal != self.device.ordinal:
                raise invalid(op, f"the stream is on cuda:{s._ordinal}, the array on cuda:{self.device.ordinal}")
            h, sync = s._h, False
        drv = driver()
        p = drv.CUDA_MEMCPY3D()
        p.WidthInBytes, p.Height, p.Depth = self._extent
        for prefix, (kind, addr, pitch, rows) in (("src", src), ("dst", dst)):
            setattr(p, prefix + "MemoryType", drv.CUmemorytype(kind))
            if kind == CU_MEMORYTYPE_ARRAY:
                setattr(p, prefix + "Array", addr)
                continue
            setattr(p, prefix + ("Host" if kind == CU_MEMORYTYPE_HOST else "Device"), addr)
            setattr(p, prefix + "Pitch", pitch)
            setattr(p, prefix + "Height", rows)
        self.device._bind_here()
        call(op, p, h)
        if sync:
            _core.stream_sync(h)

    # -- lifetime -------------------------------------------------------------------

    def _adopt(self, obj: Any) -> None:
        with self._lock:
            self._objects = [r for r in self._objects if r() is not None]
            self._objects.append(weakref.ref(obj))

    def close(self) -> None:
        """Close this array's texture and surface objects, then destroy it after its home stream's work.  Idempotent."""
        with self._lock:
            h, self._h = self._h, None
            objects, self._objects = self._objects, []
        if h is None:
            return
        try:
            for ref in objects:
                obj = ref()
                if obj is not None:
                    obj.close()
        finally:
            release_after(self.device, self._stream, "cuArrayDestroy", h)

    def __repr__(self) -> str:
        state = "closed" if self._h is None else hex(int(self._h))
        kinds = [k for k in ("surface", "layered", "cubemap", "texture_gather") if getattr(self, k)]
        return (f"<Array {state} {self.shape} x {self.channels} x {self.dtype.value}"
                f"{' ' + ','.join(kinds) if kinds else ''} on cuda:{self.device.ordinal}>")


def _alignment(device: Device, name: str) -> int:
    """A texture alignment attribute of `device` (bytes), read once per device."""
    key = (device.ordinal, name)
    found = _ALIGNMENTS.get(key)
    if found is None:
        found = _ALIGNMENTS[key] = max(device_attribute(device, name), 1)
    return found


_ALIGNMENTS: dict[tuple[int, str], int] = {}


def _address_modes(mode: Any, op: str) -> tuple[str, str, str]:
    """One mode name for every dimension, or 1-3 of them for x, y, z (the rest "clamp")."""
    modes = (mode,) * 3 if isinstance(mode, str) else mode
    if not isinstance(modes, (tuple, list)) or not 1 <= len(modes) <= 3 or any(
        not isinstance(m, str) or m not in _ADDRESS_MODES for m in modes
    ):
        raise invalid(op, f"address_mode must be one of {sorted(_ADDRESS_MODES)} or 1-3 of them (x, y, z), "
                      f"got {mode!r}")
    out = (*modes, *("clamp",) * (3 - len(modes)))
    return out[0], out[1], out[2]


def _border(color: Any, op: str) -> tuple[float, float, float, float]:
    values = (color,) * 4 if isinstance(color, (int, float, np.integer, np.floating)) else color
    if not isinstance(values, (tuple, list)) or len(values) != 4 or any(
        isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not math.isfinite(v)
        for v in values
    ):
        raise invalid(op, f"border_color must be a finite number or 4 of them (r, g, b, a), got {color!r}")
    return float(values[0]), float(values[1]), float(values[2]), float(values[3])


class TextureObject(_Object):
    """A texture object: cached, addressed and filtered reads of an Array, DeviceBuf or 2-D PitchedBuf.

    Made by `Device.create_texture`; pass `handle` as a kernel's `cudaTextureObject_t`.  See the module docstring.
    """

    device: Device
    resource: Any
    channels: int
    address_mode: tuple[str, str, str]
    filter_mode: str
    read_mode: str
    normalized_coords: bool
    border_color: tuple[float, float, float, float]
    _h: Any
    _what = "texture object"
    _destroy = "cuTexObjectDestroy"

    def __init__(self) -> None:
        raise TypeError("use Device.create_texture()")

    @classmethod
    def _create(cls, device: Device, resource: Any, *, address_mode: Any, filter_mode: Any, read_mode: Any,
                normalized_coords: Any, border_color: Any, channels: Any) -> TextureObject:
        op = "cuTexObjectCreate"
        device._check_open(op)
        modes = _address_modes(address_mode, op)
        if not isinstance(filter_mode, str) or filter_mode not in _FILTER_MODES:
            raise invalid(op, f"filter_mode must be one of {sorted(_FILTER_MODES)}, got {filter_mode!r}")
        if not isinstance(read_mode, str) or read_mode not in _READ_MODES:
            raise invalid(op, f"read_mode must be one of {list(_READ_MODES)}, got {read_mode!r}")
        normalized = _flag("normalized_coords", normalized_coords, op)
        border = _border(border_color, op)
        drv = driver()
        res = drv.CUDA_RESOURCE_DESC()
        if isinstance(resource, Array):
            if resource._h is None:
                raise closed(op, "array")
            if channels is not None and _channels(channels, op) != resource.channels:
                raise invalid(op, f"the array has {resource.channels} channel(s), not {channels}")
            nch, dtype, stream = resource.channels, resource.dtype, resource._stream
            if resource.device.ordinal != device.ordinal:
                raise invalid(op, f"the array is on cuda:{resource.device.ordinal}, the texture would be on "
                              f"cuda:{device.ordinal}")
            res.resType = drv.CUresourcetype(CU_RESOURCE_TYPE_ARRAY)
            res.res.array.hArray = resource._h
        elif isinstance(resource, PitchedBuf) or is_devicebuf(resource):
            pitched = isinstance(resource, PitchedBuf)
            buf = resource.buffer if pitched else resource
            if resource.closed:
                raise closed(op, "pitched buffer" if pitched else "buffer")
            nch = 1 if channels is None else _channels(channels, op)
            dtype, fmt = _format(resource.dtype, op)
            ordinal, stream = buf.device.ordinal, buf._stream
            if ordinal != device.ordinal:
                raise invalid(op, f"the memory is on cuda:{ordinal}, the texture would be on cuda:{device.ordinal}")
            align = _alignment(device, "TEXTURE_ALIGNMENT")
            if resource.ptr % align:
                raise invalid(op, f"texture memory must start on a {align}-byte boundary (the device's "
                              f"TEXTURE_ALIGNMENT); this one starts {resource.ptr % align} bytes past one")
            if pitched:
                if len(resource.shape) != 2:
                    raise invalid(op, f"a texture reads 2-D pitched memory, (rows, cols); got {resource.shape}")
                rows, cols = resource.shape
                if cols % nch:
                    raise invalid(op, f"rows of {cols} values are not whole texels of {nch} channels")
                pitch_align = _alignment(device, "TEXTURE_PITCH_ALIGNMENT")
                if resource.pitch % pitch_align:
                    raise invalid(op, f"the pitch ({resource.pitch} bytes) must be a multiple of {pitch_align} (the "
                                  "device's TEXTURE_PITCH_ALIGNMENT); allocate with Device.alloc_pitched")
                res.resType = drv.CUresourcetype(CU_RESOURCE_TYPE_PITCH2D)
                p2 = res.res.pitch2D
                p2.devPtr, p2.format, p2.numChannels = resource.ptr, drv.CUarray_format(fmt), nch
                p2.width, p2.height, p2.pitchInBytes = cols // nch, rows, resource.pitch
            else:
                if resource.size % nch:
                    raise invalid(op, f"{resource.size} values are not whole texels of {nch} channels")
                if filter_mode != "point" or normalized or modes != ("clamp",) * 3:
                    raise invalid(op, "a texture over linear memory (a DeviceBuf) is read by element index "
                                  "(tex1Dfetch): it neither filters nor addresses, so filter_mode, normalized_coords "
                                  "and address_mode keep their defaults; use an Array or a PitchedBuf for those")
                res.resType = drv.CUresourcetype(CU_RESOURCE_TYPE_LINEAR)
                lin = res.res.linear
                lin.devPtr, lin.format, lin.numChannels = resource.ptr, drv.CUarray_format(fmt), nch
                lin.sizeInBytes = resource.nbytes
        else:
            raise invalid(op, f"a texture reads an Array, a DeviceBuf or a PitchedBuf, got {type(resource).__name__}")
        npdt = dtype.numpy
        integer = npdt.kind in "iu"
        if read_mode == "normalized_float" and not (integer and npdt.itemsize <= 2):
            raise invalid(op, f"read_mode 'normalized_float' maps 8- and 16-bit integers to floats; {dtype.value} "
                          "is read as it is stored (read_mode='element')")
        if filter_mode == "linear" and integer and read_mode != "normalized_float":
            raise invalid(op, f"linear filtering returns floats: {dtype.value} texels need "
                          "read_mode='normalized_float' (8- and 16-bit integers only)")
        if not normalized and any(m in ("wrap", "mirror") for m in modes):
            raise invalid(op, f"address modes 'wrap' and 'mirror' need normalized_coords=True, got {modes}")
        flags = (CU_TRSF_NORMALIZED_COORDINATES if normalized else 0) | (
            CU_TRSF_READ_AS_INTEGER if integer and read_mode == "element" else 0)
        td = drv.CUDA_TEXTURE_DESC()
        td.addressMode = [drv.CUaddress_mode(_ADDRESS_MODES[m]) for m in modes]
        td.filterMode = drv.CUfilter_mode(_FILTER_MODES[filter_mode])
        td.flags = flags
        td.borderColor = list(border)
        device._bind_here()
        h = call(op, res, td, None)
        tex = cls.__new__(cls)
        tex.device = device
        tex.resource = resource
        tex.channels = nch
        tex.address_mode = modes
        tex.filter_mode = filter_mode
        tex.read_mode = read_mode
        tex.normalized_coords = normalized
        tex.border_color = border
        tex._h = h
        tex._stream = stream
        if isinstance(resource, Array):
            resource._adopt(tex)
        return tex

    def __repr__(self) -> str:
        state = "closed" if self._h is None else str(int(self._h))
        return (f"<TextureObject {state} over {type(self.resource).__name__}, {self.filter_mode}, "
                f"{'/'.join(self.address_mode)}{', normalized' if self.normalized_coords else ''} "
                f"on cuda:{self.device.ordinal}>")


class SurfaceObject(_Object):
    """A surface object: typed loads and stores of an Array made with `surface=True` (`surf2Dwrite`, ...).

    Made by `Device.create_surface`; pass `handle` as a kernel's `cudaSurfaceObject_t`.
    """

    device: Device
    array: Array
    _h: Any
    _what = "surface object"
    _destroy = "cuSurfObjectDestroy"

    def __init__(self) -> None:
        raise TypeError("use Device.create_surface()")

    @classmethod
    def _create(cls, device: Device, array: Any) -> SurfaceObject:
        op = "cuSurfObjectCreate"
        device._check_open(op)
        if not isinstance(array, Array):
            raise invalid(op, f"a surface reads and writes an Array, got {type(array).__name__}")
        if array._h is None:
            raise closed(op, "array")
        if array.device.ordinal != device.ordinal:
            raise invalid(op, f"the array is on cuda:{array.device.ordinal}, the surface would be on "
                          f"cuda:{device.ordinal}")
        if not array.surface:
            raise invalid(op, "the array was made without surface=True (CUDA_ARRAY3D_SURFACE_LDST), so no surface "
                          "can load or store it")
        drv = driver()
        res = drv.CUDA_RESOURCE_DESC()
        res.resType = drv.CUresourcetype(CU_RESOURCE_TYPE_ARRAY)
        res.res.array.hArray = array._h
        device._bind_here()
        h = call(op, res)
        surf = cls.__new__(cls)
        surf.device = device
        surf.array = array
        surf._h = h
        surf._stream = array._stream
        array._adopt(surf)
        return surf

    def __repr__(self) -> str:
        state = "closed" if self._h is None else str(int(self._h))
        return f"<SurfaceObject {state} over {self.array!r}>"
