"""Checks and packing shared by ComputeDevice implementations.

Every function raises `InvalidArgument` naming the backend and the op, so the
backends' messages read alike.  Dispatch calls these on every call, so the
common cases take a fast path: exact types first, one cached `struct.Struct`
per params signature.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

import numpy as np

from .errors import InvalidArgument
from .types import DType

__all__ = [
    "workgroups", "pack_params", "element_type", "numpy_dtype", "host_array", "check_out", "source_text",
    "evict_unused",
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


#: struct codes by exact type.  Python floats become float32; Python ints int32, or
#: uint32 above the int32 range.  Anything else (bools, float64, int64, strings) is
#: refused: a silent conversion would hide a caller's mistake.
_CODES: dict[type, str] = {np.float32: "f", np.int32: "i", np.uint32: "I", float: "f"}
_PACKERS: dict[tuple[type, ...], Callable[..., bytes]] = {}


def pack_params(backend: str, params: Sequence[Any], expected: int, op: str = "dispatch") -> bytes:
    """`params` as consecutive little-endian 32-bit words (push constants, a uniform block of scalars)."""
    if len(params) != expected:
        raise InvalidArgument(backend, op, detail=f"the pipeline takes {expected} params, got {len(params)}")
    types = tuple(map(type, params))
    packer = _PACKERS.get(types)
    if packer is None:
        codes = []
        for index, (kind, value) in enumerate(zip(types, params)):
            code = _CODES.get(kind)
            if code is None:
                if kind is not int:
                    raise InvalidArgument(backend, op, detail=f"param {index} is {kind.__name__}; params are 32-bit "
                                          "scalars (np.float32, np.int32, np.uint32, float, int)")
                code = "i" if value < 2**31 else "I"
            codes.append(code)
        packer = struct.Struct("<" + "".join(codes)).pack
        if int not in types:  # an int's code depends on its value, so those signatures are not cached
            _PACKERS[types] = packer
    try:
        return packer(*params)
    except (struct.error, OverflowError) as exc:
        raise InvalidArgument(backend, op, detail=f"params {tuple(params)!r} do not fit 32 bits: {exc}") from None


def element_type(backend: str, value: Any, op: str) -> DType:
    """`DType.of(value)`, with InvalidArgument naming the op instead of TypeError."""
    try:
        return DType.of(value)
    except TypeError as exc:
        raise InvalidArgument(backend, op, detail=str(exc)) from None


_NUMPY: dict[DType, np.dtype] = {}


def numpy_dtype(dtype: DType) -> np.dtype:
    """`dtype.numpy`, memoised (building a numpy dtype costs a microsecond or so)."""
    found = _NUMPY.get(dtype)
    if found is None:
        found = _NUMPY[dtype] = dtype.numpy
    return found


def host_array(backend: str, array: Any, op: str) -> np.ndarray:
    """`array` as a C-contiguous, native-endian, non-object numpy array (no copy is made)."""
    data = array if type(array) is np.ndarray else np.asarray(array)
    if not data.flags.c_contiguous:
        raise InvalidArgument(backend, op, detail="the array is not C-contiguous; pass np.ascontiguousarray(a)")
    if data.dtype.hasobject:
        raise InvalidArgument(backend, op, detail="object arrays cannot be copied to a device")
    if not data.dtype.isnative:
        raise InvalidArgument(backend, op, detail=f"the array's byte order is not native ({data.dtype})")
    return data


def check_out(backend: str, out: Any, nbytes: int, op: str = "download") -> None:
    """Check a caller's output array: a writeable C-contiguous ndarray of at most `nbytes` bytes."""
    if not isinstance(out, np.ndarray):
        raise InvalidArgument(backend, op, detail=f"out must be a numpy array, got {type(out).__name__}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise InvalidArgument(backend, op, detail="out must be a writeable C-contiguous array")
    if out.nbytes > nbytes:
        raise InvalidArgument(backend, op, detail=f"out holds {out.nbytes} bytes, the buffer only {nbytes}")


_SPIRV_MAGIC = (b"\x03\x02\x23\x07", b"\x07\x23\x02\x03")


def source_text(backend: str, code: Any, language: str, op: str = "pipeline") -> str:
    """`code` as shader source text (str, or UTF-8 bytes); SPIR-V and word lists are refused."""
    if isinstance(code, (bytes, bytearray, memoryview)):
        raw = bytes(code)
        if raw[:4] in _SPIRV_MAGIC:
            raise InvalidArgument(backend, op, detail=f"this is SPIR-V; {backend} code is {language} source")
        try:
            return raw.decode()
        except UnicodeDecodeError as exc:
            raise InvalidArgument(backend, op, detail=f"code bytes are not UTF-8 text: {exc}") from None
    if not isinstance(code, str):
        raise InvalidArgument(backend, op, detail=f"{backend} code is {language} source, got {type(code).__name__}")
    return code


def evict_unused(programs: MutableMapping[Any, Any], limit: int) -> None:
    """Shrink a least-recently-used program cache to `limit` by releasing programs no pipeline uses.

    The cache maps keys to objects with `users` (live pipelines) and `release()`;
    programs in use stay, so the cache may stay over the limit until they close.
    """
    if len(programs) <= limit:
        return
    for key, program in list(programs.items()):
        if program.users == 0:
            del programs[key]
            program.release()
            if len(programs) <= limit:
                return
