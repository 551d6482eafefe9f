"""DLPack capsules, both ways, with ctypes (the capsule destructor is in the compiled core).

Export: `export(ptr, size, dtype, device, keepalive, versioned)` builds a
`DLManagedTensor` (or `DLManagedTensorVersioned`) whose deleter drops the
reference to `keepalive`, wrapped in a capsule named "dltensor" (or
"dltensor_versioned"); if no consumer takes it, the capsule's destructor (in
the compiled core, so that it also runs while a consumer's error is pending)
drops the export.

Import: `consume(capsule)` reads a capsule a producer handed us, marks it used
and returns an `Imported` with the pointer, shape, strides, dtype and device,
and `release()` that calls the producer's deleter exactly once.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ironaccel import DType

from . import _core

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13

_INT, _UINT, _FLOAT, _BFLOAT, _COMPLEX, _BOOL = 0, 1, 2, 4, 5, 6


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Our own handle on the C API, so argtypes set here never clash with ctypes.pythonapi users.
_api = ctypes.PyDLL(None)
_capsule_new = _api.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_is_valid = _api.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capsule_get_pointer = _api.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capsule_set_name = _api.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]

NAME = b"dltensor"
NAME_V = b"dltensor_versioned"
USED = b"used_dltensor"
USED_V = b"used_dltensor_versioned"

# Exported tensors still owned by a capsule or a consumer: address -> (struct, shape, keepalive).
_exports: dict[int, tuple[Any, Any, Any]] = {}
_exports_lock = threading.Lock()


def _drop(addr: int | None) -> None:
    if addr:
        with _exports_lock:
            _exports.pop(addr, None)


_deleter = _DELETER(_drop)


# The capsule's destructor is C (native/_core_buffer.pxi): it runs while a consumer's exception may be pending,
# which a ctypes callback cannot survive.  For a capsule nobody consumed it drops the export, as the deleter would.
_DESTRUCTOR_ADDR = _core.dlpack_capsule_destructor(_drop)


def dl_dtype(dtype: DType) -> tuple[int, int]:
    """(type code, bits) of a DType."""
    np_kind = {DType.BOOL: _BOOL, DType.BFLOAT16: _BFLOAT}.get(dtype)
    if np_kind is None:
        kind = np.dtype(dtype.value).kind
        np_kind = {"i": _INT, "u": _UINT, "f": _FLOAT, "c": _COMPLEX}[kind]
    return np_kind, dtype.itemsize * 8


def dtype_from_dl(code: int, bits: int, lanes: int) -> DType:
    if lanes != 1:
        raise TypeError(f"DLPack vector dtypes (lanes={lanes}) are not supported")
    if code == _BOOL and bits == 8:
        return DType.BOOL
    if code == _BFLOAT and bits == 16:
        return DType.BFLOAT16
    kind = {_INT: "int", _UINT: "uint", _FLOAT: "float", _COMPLEX: "complex"}.get(code)
    if kind is None:
        raise TypeError(f"unsupported DLPack dtype code {code}")
    return DType.of(f"{kind}{bits}")


def export(ptr: int, size: int | tuple[int, ...], dtype: DType, device: tuple[int, int], keepalive: Any,
           versioned: bool, strides: tuple[int, ...] | None = None, readonly: bool = False) -> Any:
    """A DLPack capsule over `size` elements at `ptr` (or an array of shape `size`, with `strides` in elements when
    not C-contiguous); `keepalive` lives until the consumer is done.  `readonly` is told to versioned consumers."""
    dims = (size,) if isinstance(size, int) else tuple(size)
    ndim = len(dims)
    shape = (ctypes.c_int64 * max(ndim, 1))(*dims)
    steps = None if strides is None else (ctypes.c_int64 * max(ndim, 1))(*strides)
    managed: Any = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    t = managed.dl_tensor
    t.data = ptr
    t.device = DLDevice(*device)
    t.ndim = ndim
    code, bits = dl_dtype(dtype)
    t.dtype = DLDataType(code, bits, 1)
    t.shape = shape
    t.strides = steps
    t.byte_offset = 0
    managed.deleter = _deleter
    if versioned:
        managed.version = DLPackVersion(1, 0)
        managed.flags = 1 if readonly else 0
    addr = ctypes.addressof(managed)
    with _exports_lock:
        _exports[addr] = (managed, (shape, steps), keepalive)
    return _capsule_new(addr, NAME_V if versioned else NAME, _DESTRUCTOR_ADDR)


def live_exports() -> int:
    """How many exported tensors are still held (for leak tests)."""
    return len(_exports)


@dataclass
class Imported:
    """A consumed DLPack tensor; call `release()` when the memory is no longer used."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in elements
    dtype: DType
    device_type: int
    device_id: int
    readonly: bool
    _managed: int
    _versioned: bool
    _released: bool = False

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        kind = DLManagedTensorVersioned if self._versioned else DLManagedTensor
        managed = kind.from_address(self._managed)
        if managed.deleter:
            managed.deleter(self._managed)

    @property
    def contiguous(self) -> bool:
        if self.strides is None:
            return True
        expected = 1
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            if extent != 1 and stride != expected:
                return False
            expected *= extent
        return True


def consume(capsule: Any) -> Imported:
    """Take ownership of a producer's capsule (renaming it used_*)."""
    addr = id(capsule)  # a PyObject* is its id in CPython
    if _capsule_is_valid(addr, NAME_V):
        versioned, name, used = True, NAME_V, USED_V
    elif _capsule_is_valid(addr, NAME):
        versioned, name, used = False, NAME, USED
    else:
        raise TypeError("not an unconsumed DLPack capsule (expected 'dltensor' or 'dltensor_versioned')")
    pointer = _capsule_get_pointer(addr, name)
    if versioned:
        managed_v = DLManagedTensorVersioned.from_address(pointer)
        if managed_v.version.major > 1:
            raise TypeError(f"DLPack version {managed_v.version.major} is newer than this consumer supports")
        t = managed_v.dl_tensor
        readonly = bool(managed_v.flags & 1)
    else:
        t = DLManagedTensor.from_address(pointer).dl_tensor
        readonly = False
    ndim = t.ndim
    shape = tuple(t.shape[i] for i in range(ndim))
    strides = tuple(t.strides[i] for i in range(ndim)) if t.strides else None
    dtype = dtype_from_dl(t.dtype.code, t.dtype.bits, t.dtype.lanes)
    data = (t.data or 0) + t.byte_offset
    _capsule_set_name(capsule, used)
    return Imported(data, shape, strides, dtype, t.device.device_type, t.device.device_id, readonly, pointer,
                    versioned)
