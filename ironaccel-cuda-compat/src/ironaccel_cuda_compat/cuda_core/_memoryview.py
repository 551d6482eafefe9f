"""cuda.core's `StridedMemoryView`: pointer, shape, strides and dtype of any array-like, and the decorator.

Views are made from DLPack (ironaccel's `_dlpack.consume`), the CUDA Array Interface,
the NumPy array interface or a `Buffer`; `strides` are in elements (None for a
C-contiguous producer that gave none).  `_layout` is cuda.core's `_StridedLayout` of the view, made on
first access (numba-cuda packs kernel arguments and types views from it).  A view exports itself again
through DLPack.
Copies between views and TMA descriptors are not in the compat yet.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _ia, _needs
from ._dlpack import export_versioned
from ._layout import _StridedLayout
from ._missing import missing_error

__all__ = ["StridedMemoryView", "args_viewable_as_strided_memory"]

_DEVICE_TYPES = (2, 3, 13)  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged


class StridedMemoryView:
    """A typed, strided view of memory another object owns (kept alive as `exporting_obj`)."""

    __slots__ = ("ptr", "device_id", "is_device_accessible", "readonly", "exporting_obj", "_shape", "_strides",
                 "_dtype", "_device_type", "_imported", "_lay", "__weakref__")

    def __init__(self, obj: Any = None, stream_ptr: int | None = None) -> None:
        if obj is None:
            self._empty()
            return
        other = StridedMemoryView.from_any_interface(obj, stream_ptr)
        for name in StridedMemoryView.__slots__[:-1]:
            setattr(self, name, getattr(other, name))
        other._imported = None

    def _empty(self) -> None:
        self.ptr = 0
        self.device_id = -1
        self.is_device_accessible = False
        self.readonly = False
        self.exporting_obj = None
        self._shape: tuple[int, ...] = ()
        self._strides: tuple[int, ...] | None = None
        self._dtype: np.dtype | None = None
        self._device_type = 1
        self._imported: Any = None
        self._lay: _StridedLayout | None = None

    @classmethod
    def _make(cls, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...] | None, dtype: Any, device_type: int,
              device_id: int, readonly: bool, obj: Any, imported: Any = None) -> StridedMemoryView:
        v = object.__new__(cls)
        v.ptr = int(ptr)
        v._shape = tuple(int(s) for s in shape)
        v._strides = None if strides is None else tuple(int(s) for s in strides)
        v._dtype = None if dtype is None else np.dtype(dtype)
        v._device_type = int(device_type)
        v.device_id = int(device_id)
        v.is_device_accessible = int(device_type) in _DEVICE_TYPES
        v.readonly = bool(readonly)
        v.exporting_obj = obj
        v._imported = imported
        v._lay = None
        return v

    # -- constructors --------------------------------------------------------------

    @classmethod
    def from_dlpack(cls, obj: Any, stream_ptr: int | None = None) -> StridedMemoryView:
        _dlpack = _ia.dlpack

        if not hasattr(obj, "__dlpack__"):
            raise TypeError(f"StridedMemoryView.from_dlpack: {type(obj).__name__} has no __dlpack__ method")
        device_type = int(obj.__dlpack_device__()[0]) if hasattr(obj, "__dlpack_device__") else 2
        # cuda.core's rules, checked before the producer is asked: CPU and CUDA sources need a stream (-1: none, the
        # caller orders the work), pinned and managed ones pass through, any other device is refused.
        if device_type not in (1, *_DEVICE_TYPES):
            raise BufferError(f"StridedMemoryView.from_dlpack: device not supported (DLPack device type {device_type})")
        if stream_ptr is None and device_type in (1, 2):
            raise BufferError("StridedMemoryView.from_dlpack: stream=None is ambiguous with view(); pass stream_ptr= "
                              "(-1 for no synchronization)")
        # CPU producers take no stream; a stream given as an object (a Stream's `handle`, a CUstream) goes as its
        # int, as cuda.core passes it (CuPy refuses anything else; cuda.core's strided_memory_view examples do so).
        stream = None if device_type in (1, 3) or stream_ptr is None else (int(stream_ptr) or None)
        try:
            capsule = obj.__dlpack__(stream=stream, max_version=(1, 0))
        except TypeError:
            capsule = obj.__dlpack__(stream=stream)
        imported = _dlpack.consume(capsule)
        device_id = imported.device_id if imported.device_type == 2 else (0 if imported.device_type != 1 else -1)
        return cls._make(imported.ptr, imported.shape, imported.strides, imported.dtype.numpy, imported.device_type,
                         device_id, imported.readonly, obj, imported)

    @classmethod
    def from_cuda_array_interface(cls, obj: Any, stream_ptr: int | None = None) -> StridedMemoryView:
        cai = _interface(obj, "__cuda_array_interface__", "StridedMemoryView.from_cuda_array_interface")
        if cai.get("version", 0) < 3 and "stream" in cai:
            raise BufferError("only CUDA Array Interface v3 or later is supported")
        ptr, readonly = cai["data"]
        dtype = np.dtype(cai["typestr"])
        strides = cai.get("strides")
        if strides is not None:
            strides = tuple(s // dtype.itemsize for s in strides)
        producer = cai.get("stream")
        if producer and stream_ptr is not None and stream_ptr != -1 and int(producer) != int(stream_ptr):
            _order(int(producer), int(stream_ptr))
        device_id = _pointer_device(int(ptr)) if ptr else 0
        return cls._make(ptr, cai["shape"], strides, dtype, 2, device_id, readonly, obj)

    @classmethod
    def from_array_interface(cls, obj: Any) -> StridedMemoryView:
        ai = _interface(obj, "__array_interface__", "StridedMemoryView.from_array_interface")
        ptr, readonly = ai["data"]
        dtype = np.dtype(ai["typestr"])
        strides = ai.get("strides")
        if strides is not None:
            strides = tuple(s // dtype.itemsize for s in strides)
        return cls._make(ptr, ai["shape"], strides, dtype, 1, -1, readonly, obj)

    @classmethod
    def from_any_interface(cls, obj: Any, stream_ptr: int | None = None) -> StridedMemoryView:
        if hasattr(obj, "__dlpack__"):
            return cls.from_dlpack(obj, stream_ptr)
        if hasattr(obj, "__cuda_array_interface__"):
            return cls.from_cuda_array_interface(obj, stream_ptr)
        if hasattr(obj, "__array_interface__"):
            return cls.from_array_interface(obj)
        raise TypeError(f"{type(obj).__name__} speaks neither DLPack, the CUDA Array Interface nor the NumPy array "
                        "interface")

    @classmethod
    def from_buffer(cls, buffer: Any, shape: tuple[int, ...], strides: tuple[int, ...] | None = None, *,
                    itemsize: int | None = None, dtype: Any = None, is_readonly: bool = False) -> StridedMemoryView:
        if dtype is None and itemsize is None:
            raise ValueError("one of dtype or itemsize must be given")
        npdt = np.dtype(dtype) if dtype is not None else np.dtype(f"V{itemsize}")
        if not hasattr(buffer, "__dlpack_device__") or not hasattr(buffer, "handle"):
            raise TypeError(f"StridedMemoryView.from_buffer: buffer must be a Buffer, got {type(buffer).__name__}")
        device_type, device_id = buffer.__dlpack_device__()
        return cls._make(buffer.handle, shape, strides, npdt, device_type, device_id, is_readonly, buffer)

    def __del__(self) -> None:
        imported = getattr(self, "_imported", None)
        if imported is not None:
            self._imported = None
            imported.release()

    # -- views and copies ------------------------------------------------------------

    def view(self, layout: Any = None, dtype: Any = None) -> StridedMemoryView:
        if layout is not None:
            raise missing_error("StridedMemoryView.view(layout=...)", _needs.TENSOR_MAP)
        new_dtype = self._dtype if dtype is None else np.dtype(dtype)
        shape, strides = self._shape, self._strides
        if new_dtype is not None and self._dtype is not None and new_dtype.itemsize != self._dtype.itemsize:
            if strides is not None and shape and strides[-1] != 1:
                raise ValueError("the last dimension must be contiguous to change the itemsize")
            last = shape[-1] * self._dtype.itemsize if shape else self._dtype.itemsize
            if last % new_dtype.itemsize:
                raise ValueError("the last dimension's bytes are not a multiple of the new itemsize")
            shape = (*shape[:-1], last // new_dtype.itemsize)
            if strides is not None:
                factor = self._dtype.itemsize
                strides = (*[s * factor // new_dtype.itemsize for s in strides[:-1]], 1)
        return StridedMemoryView._make(self.ptr, shape, strides, new_dtype, self._device_type, self.device_id,
                                       self.readonly, self)

    def copy_from(self, other: Any, stream: Any, allocator: Any = None, blocking: bool | None = None) -> None:
        raise missing_error("StridedMemoryView.copy_from", _needs.STRIDED_COPY)

    def copy_to(self, other: Any, stream: Any = None, allocator: Any = None, blocking: bool | None = None) -> None:
        raise missing_error("StridedMemoryView.copy_to", _needs.STRIDED_COPY)

    def as_tensor_map(self, *args: Any, **kwargs: Any) -> Any:
        raise missing_error("StridedMemoryView.as_tensor_map", _needs.TENSOR_MAP)

    # -- DLPack ---------------------------------------------------------------------

    def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        return _export(self, export_versioned(max_version, dl_device, copy))

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self._device_type, 0 if self._device_type != 2 else self.device_id)

    # -- properties -----------------------------------------------------------------

    @property
    def _layout(self) -> _StridedLayout:
        """The view's shape, strides and itemsize as cuda.core's `_StridedLayout` (made on first access)."""
        lay = self._lay
        if lay is None:
            if self._dtype is None:
                raise ValueError("Cannot infer layout from the exporting object")
            if self._dtype.itemsize <= 0:
                raise ValueError("itemsize must be positive")
            if any(n < 0 for n in self._shape):
                raise ValueError("Extents must be non-negative")
            if self._strides is not None and len(self._strides) != len(self._shape):
                raise ValueError(f"Strides, if provided, must have the same length as shape. Shape has "
                                 f"{len(self._shape)} dimensions, but strides has {len(self._strides)} elements.")
            lay = self._lay = _StridedLayout._trusted(self._shape, self._strides, self._dtype.itemsize)
        return lay

    @property
    def size(self) -> int:
        return int(np.prod(self._shape)) if self._shape else 1

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def strides(self) -> tuple[int, ...] | None:
        return self._strides

    @property
    def dtype(self) -> np.dtype | None:
        return self._dtype

    def __repr__(self) -> str:
        return (f"StridedMemoryView(ptr={self.ptr}, shape={self._shape}, strides={self._strides}, "
                f"dtype={self._dtype}, device_id={self.device_id}, is_device_accessible={self.is_device_accessible}, "
                f"readonly={self.readonly})")


class _StridedMemoryViewProxy:
    """What `args_viewable_as_strided_memory` passes: call `.view(stream_ptr)` for the view."""

    __slots__ = ("obj", "has_dlpack")

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.has_dlpack = hasattr(obj, "__dlpack__")

    def view(self, stream_ptr: int | None = None) -> StridedMemoryView:
        return StridedMemoryView.from_any_interface(self.obj, stream_ptr)


def args_viewable_as_strided_memory(arg_indices: tuple[int, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a function so that the positional arguments at `arg_indices` arrive as view proxies."""

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            args_list = list(args)
            for i in arg_indices:
                args_list[i] = _StridedMemoryViewProxy(args_list[i])
            return fn(*args_list, **kwargs)

        return wrapped

    return decorator


def _interface(obj: Any, name: str, op: str) -> dict[str, Any]:
    """`obj`'s array interface dict `name`, with the keys every view needs; TypeError naming `op` otherwise."""
    try:
        d = getattr(obj, name)
    except AttributeError:
        raise TypeError(f"{op}: {type(obj).__name__} has no {name}") from None
    if not isinstance(d, dict):
        raise TypeError(f"{op}: {name} must be a dict, got {type(d).__name__}")
    missing = [k for k in ("shape", "typestr", "data") if k not in d]
    if missing:
        raise TypeError(f"{op}: {name} lacks {', '.join(map(repr, missing))}")
    return d


def _pointer_device(ptr: int) -> int:
    from ._utils.cuda_utils import pointer_attribute

    ordinal = pointer_attribute(ptr, "device_ordinal")
    return 0 if ordinal is None else ordinal


def _order(producer: int, consumer: int) -> None:
    """Make stream `consumer` wait for the work queued so far on stream `producer`."""
    from ._device import Device
    from ._stream import order_after

    dev = Device()
    order_after(_ia.IaStream.from_handle(consumer, dev), _ia.IaStream.from_handle(producer, dev), dev)


def _export(view: StridedMemoryView, versioned: bool) -> Any:
    """A DLPack capsule over the view (its shape and strides), keeping the view alive until the consumer is done."""
    from ironaccel import DType

    if view._dtype is None:
        raise BufferError("the view has no dtype")
    if view._strides is not None and len(view._strides) != len(view._shape):
        raise BufferError(f"StridedMemoryView.__dlpack__: {len(view._strides)} strides for {len(view._shape)} "
                          "dimensions")
    if any(n < 0 for n in view._shape):
        raise BufferError(f"StridedMemoryView.__dlpack__: negative shape {view._shape}")
    return _ia.dlpack.export(view.ptr, tuple(view._shape), DType.of(view._dtype), view.__dlpack_device__(), view,
                             versioned, strides=None if view._strides is None else tuple(view._strides),
                             readonly=bool(view.readonly))
