"""Argument checks and params packing shared by every ComputeDevice.

Each function raises `InvalidArgument` naming the backend and the op, so the
backends' messages read alike, and none lets a raw TypeError out.  Dispatch
calls some of these on every call, so the common cases take a fast path:
exact types first, one cached `struct.Struct` per params signature.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import InvalidArgument
from ..types import DType

__all__ = [
    "workgroups", "workgroup_size", "pack_params", "element_type", "numpy_dtype", "host_array", "check_out",
    "count", "element_count", "entry_name", "buffer_list", "timeout_seconds", "host_buffer",
]


def workgroups(
    backend: str, groups: Any, limits: Sequence[int], op: str = "dispatch", limit_name: str = "the device's limit"
) -> tuple[int, int, int]:
    """(x, y, z) workgroup counts from an int or 1 to 3 ints, each in 1..limits[i]."""
    kind = type(groups)
    if kind is int and 0 < groups <= limits[0]:
        return (groups, 1, 1)
    if kind is tuple and 0 < len(groups) <= 3:
        x, y, z = groups + (1, 1)[: 3 - len(groups)]
        if type(x) is int and type(y) is int and type(z) is int and 0 < x <= limits[0] and 0 < y <= limits[1] \
                and 0 < z <= limits[2]:
            return (x, y, z)
    if isinstance(groups, (int, np.integer)) and not isinstance(groups, bool):
        dims: tuple[int, ...] = (int(groups), 1, 1)
    elif isinstance(groups, (tuple, list)) and 1 <= len(groups) <= 3 and all(
        isinstance(g, (int, np.integer)) and not isinstance(g, bool) for g in groups
    ):
        dims = (*(int(g) for g in groups), 1, 1)[:3]
    else:
        raise InvalidArgument(backend, op, detail=f"groups must be an int or 1 to 3 ints, got {groups!r}")
    if min(dims) < 1 or any(d > m for d, m in zip(dims, limits)):
        raise InvalidArgument(backend, op, detail=f"groups {dims} outside 1..{tuple(limits)} ({limit_name})")
    return dims  # type: ignore[return-value]


def workgroup_size(backend: str, size: Any, op: str = "pipeline") -> tuple[int, int, int]:
    """(x, y, z) from an int or 1 to 3 positive ints (the `workgroup_size=` of `pipeline`)."""
    if type(size) is tuple and len(size) == 3 and all(type(s) is int and s > 0 for s in size):
        return size  # type: ignore[return-value]
    parts = (size,) if isinstance(size, (int, np.integer)) else size
    if isinstance(parts, (tuple, list)) and 1 <= len(parts) <= 3 and all(
            isinstance(p, (int, np.integer)) and not isinstance(p, bool) and p >= 1 for p in parts):
        return (*(int(p) for p in parts), 1, 1)[:3]  # type: ignore[return-value]
    raise InvalidArgument(backend, op, detail=f"workgroup_size must be an int or 1 to 3 positive ints, got {size!r}")


#: struct codes by exact type.  Python floats become float32; Python ints int32, or
#: uint32 above the int32 range.  Anything else (bools, float64, int64, strings) is
#: refused: a silent conversion would hide a caller's mistake.
_CODES: dict[type, str] = {np.float32: "f", np.int32: "i", np.uint32: "I", float: "f"}
_PACKERS: dict[tuple[type, ...], Callable[..., bytes]] = {}


def pack_params(backend: str, params: Any, expected: int, op: str = "dispatch") -> bytes:
    """`params` (a list, tuple or 1-D array of 32-bit scalars) as consecutive little-endian 32-bit words."""
    if type(params) is not tuple and type(params) is not list:
        params = _sequence(backend, params, "params", op)
    if len(params) != expected:
        raise InvalidArgument(backend, op, detail=f"the pipeline takes {expected} params, got {len(params)}")
    types = tuple(map(type, params))
    packer = _PACKERS.get(types)
    if packer is not None:
        try:
            return packer(*params)
        except (struct.error, OverflowError):
            pass  # an int past the int32 range (its code is then uint32), or a value that fits no code: below
    return _pack_by_value(backend, params, types, op)


def _pack_by_value(backend: str, params: Any, types: tuple[type, ...], op: str) -> bytes:
    """The packing rule in full: each int's code chosen by its value.  A signature's packer is cached with "i"
    for its ints, the code of every int below 2**31; one that does not fit comes back here."""
    codes = []
    for index, (kind, value) in enumerate(zip(types, params)):
        code = _CODES.get(kind)
        if code is None:
            if kind is not int:
                raise InvalidArgument(backend, op, detail=f"param {index} is {kind.__name__}; params are 32-bit "
                                      "scalars (np.float32, np.int32, np.uint32, float, int)")
            code = "i" if value < 2**31 else "I"
        codes.append(code)
    if types not in _PACKERS:
        _PACKERS[types] = struct.Struct("<" + "".join(_CODES.get(kind, "i") for kind in types)).pack
    try:
        return struct.pack("<" + "".join(codes), *params)
    except (struct.error, OverflowError) as exc:
        raise InvalidArgument(backend, op, detail=f"params {tuple(params)!r} do not fit 32 bits: {exc}") from None


def _sequence(backend: str, value: Any, name: str, op: str) -> Sequence[Any]:
    """`value` if it is a list, tuple, other Sequence or 1-D array; InvalidArgument for None, generators, scalars."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return value  # type: ignore[return-value]
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray, memoryview)):
        return value
    raise InvalidArgument(backend, op, detail=f"{name} must be a list or tuple, got {type(value).__name__}"
                          + (" (a generator or iterator is not accepted: pass list(...))"
                             if hasattr(value, "__next__") else ""))


def buffer_list(backend: str, buffers: Any, expected: int, op: str = "dispatch") -> Sequence[Any]:
    """`buffers` as a sequence of `expected` items (what each item is, is the device's check)."""
    if type(buffers) is not list and type(buffers) is not tuple:
        buffers = _sequence(backend, buffers, "buffers", op)
    if len(buffers) != expected:
        raise InvalidArgument(backend, op, detail=f"the pipeline binds {expected} buffers, got {len(buffers)}")
    return buffers  # type: ignore[no-any-return]


def count(backend: str, name: str, value: Any, op: str = "pipeline", limit: int | None = None,
          limit_name: str = "") -> int:
    """A non-negative int argument such as `buffers=` or `params=`, at most `limit`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InvalidArgument(backend, op, detail=f"{name} must be an int >= 0, got {value!r}")
    if limit is not None and value > limit:
        raise InvalidArgument(backend, op, detail=f"{name}={value} is over {limit_name or 'the limit'} ({limit})")
    return int(value)


def element_count(backend: str, size: Any, dtype: DType, max_bytes: int, op: str, limit_name: str) -> int:
    """The element count of a new buffer: an int >= 1 whose bytes fit `max_bytes`."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise InvalidArgument(backend, op, detail=f"size must be an int, got {size!r}")
    size = int(size)
    if not 0 < size * dtype.itemsize <= max_bytes:
        raise InvalidArgument(backend, op, detail=f"size {size} x {dtype.itemsize} bytes is outside 1..{max_bytes} "
                              f"bytes ({limit_name})")
    return size


def entry_name(backend: str, entry: Any, op: str = "pipeline") -> str:
    """A non-empty str that the driver can take as a C string: no NUL, no lone surrogate."""
    if not isinstance(entry, str) or not entry or "\0" in entry:
        raise InvalidArgument(backend, op, detail=f"entry must be a non-empty str without NUL, got {entry!r}")
    if not entry.isascii():
        try:
            entry.encode()
        except UnicodeEncodeError:
            raise InvalidArgument(backend, op, detail=f"entry {entry!r} holds a lone surrogate; it must be "
                                  "encodable as UTF-8") from None
    return entry


#: What `element_type` has resolved: names, numpy dtypes and types, DTypes (bounded; refusals are not kept).
_ELEMENT_TYPES: dict[Any, DType] = {}


def element_type(backend: str, value: Any, op: str) -> DType:
    """`DType.of(value)`, with InvalidArgument naming the op instead of TypeError."""
    try:
        found = _ELEMENT_TYPES.get(value)
    except TypeError:  # unhashable: DType.of says what it is
        found = None
    if found is not None:
        return found
    try:
        found = DType.of(value)
    except TypeError as exc:
        raise InvalidArgument(backend, op, detail=str(exc)) from None
    if len(_ELEMENT_TYPES) < 256:
        try:
            _ELEMENT_TYPES[value] = found
        except TypeError:
            pass
    return found


_NUMPY: dict[int, tuple[DType, np.dtype]] = {}


def numpy_dtype(dtype: DType) -> np.dtype:
    """`dtype.numpy`, memoised (building a numpy dtype costs a microsecond or so) by the DType's id, since
    hashing an Enum member is a Python-level call; the entry keeps the DType, so its id stays its own."""
    found = _NUMPY.get(id(dtype))
    if found is None or found[0] is not dtype:
        found = _NUMPY[id(dtype)] = (dtype, dtype.numpy)
    return found[1]


def host_array(backend: str, array: Any, op: str) -> np.ndarray:
    """`array` as a C-contiguous, native-endian, non-object numpy array (no copy is made)."""
    try:
        data = array if type(array) is np.ndarray else np.asarray(array)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(backend, op, detail=f"not an array: {exc}") from None
    if not data.flags.c_contiguous:
        raise InvalidArgument(backend, op, detail="the array is not C-contiguous; pass np.ascontiguousarray(a)")
    if data.dtype.hasobject:
        raise InvalidArgument(backend, op, detail="object arrays cannot be copied to a device")
    if not data.dtype.isnative:
        raise InvalidArgument(backend, op, detail=f"the array's byte order is not native ({data.dtype})")
    return data


#: numpy dtypes already seen by `host_buffer`: native, not of objects, and a DType (hashing a dtype is cheap).
_HOST_DTYPES: dict[np.dtype, DType] = {}


def host_buffer(backend: str, array: Any, op: str) -> tuple[np.ndarray, DType]:
    """`host_array(array)` and its DType, with a fast path for a C-contiguous ndarray of a dtype seen before."""
    if type(array) is np.ndarray:
        dt = _HOST_DTYPES.get(array.dtype)
        if dt is not None and array.flags.c_contiguous:
            return array, dt
    data = host_array(backend, array, op)
    dt = element_type(backend, data.dtype, op)
    if len(_HOST_DTYPES) < 64:
        _HOST_DTYPES[data.dtype] = dt
    return data, dt


def check_out(backend: str, out: Any, nbytes: int, op: str = "download") -> None:
    """Check a caller's output array: a writeable C-contiguous ndarray of at most `nbytes` bytes, not of objects."""
    if not isinstance(out, np.ndarray):
        raise InvalidArgument(backend, op, detail=f"out must be a numpy array, got {type(out).__name__}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise InvalidArgument(backend, op, detail="out must be a writeable C-contiguous array")
    if out.dtype.hasobject:
        raise InvalidArgument(backend, op, detail="out must not be an object array")
    if out.nbytes > nbytes:
        raise InvalidArgument(backend, op, detail=f"out holds {out.nbytes} bytes, the buffer only {nbytes}")


def timeout_seconds(backend: str, timeout: Any, op: str = "wait") -> float | None:
    """A wait's timeout in seconds: None (and inf) is forever, 0 polls; NaN, negatives and non-numbers are refused."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.integer, np.floating)):
        raise InvalidArgument(backend, op, detail=f"timeout must be None or a number of seconds, got {timeout!r}")
    try:
        seconds = float(timeout)
    except OverflowError:  # an int past the float range
        seconds = math.inf if timeout > 0 else -math.inf
    if math.isnan(seconds) or seconds < 0:
        raise InvalidArgument(backend, op, detail=f"timeout must be >= 0 seconds (or None), got {timeout!r}")
    return None if math.isinf(seconds) else seconds
