"""Kernel arguments as cuda.core takes them, turned into what ironaccel's launch packs.

ironaccel packs arguments against the kernel's own parameter layout; it takes ints,
floats, bools, numpy scalars and its buffers as they are.  A `Buffer` becomes its
address on the launch path; ctypes scalars, Python complex and subclasses of the
built-in numbers are converted here, off the hot path.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from . import _ia

__all__ = ["ParamHolder", "convert_arg"]

_CTYPES_SCALARS = (ctypes.c_bool, ctypes.c_int8, ctypes.c_int16, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint8,
                   ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_float, ctypes.c_double)


def convert_arg(arg: Any) -> Any:
    """One cuda.core kernel argument as an ironaccel one; TypeError for a type no kernel parameter takes."""
    from ._memory._buffer import Buffer

    if isinstance(arg, Buffer):
        if arg.is_closed:  # its address 0 would fault the kernel, and the context with it
            raise _ia.ClosedError("cuda", "cuLaunchKernel", "a Buffer argument")
        return arg.handle
    if isinstance(arg, np.generic):
        return arg
    if isinstance(arg, bool):
        return bool(arg)
    if isinstance(arg, int):
        return int(arg)
    if isinstance(arg, float):
        return float(arg)
    if isinstance(arg, complex):
        return np.complex128(arg)
    for ctype in _CTYPES_SCALARS:
        if isinstance(arg, ctype):
            return np.dtype(ctype).type(arg.value)
    if isinstance(arg, ctypes.c_void_p):
        return int(arg.value or 0)
    if type(arg).__module__.startswith("cuda.bindings") and hasattr(arg, "__int__"):
        return int(arg)  # a driver handle or pointer object (CUdeviceptr, ...)
    from ironaccel_cuda.memory import DeviceBuf

    if isinstance(arg, DeviceBuf):
        return arg
    from .graph._graph_definition import GraphCondition

    if isinstance(arg, GraphCondition):
        return int(arg)  # a cudaGraphConditionalHandle parameter
    raise TypeError(f"the argument is of unsupported type: {type(arg)}")


class ParamHolder:
    """Arguments packed at their natural sizes into one block, with the array of pointers the driver reads.

    (cuda.core's internal argument holder; ironaccel's launch packs against the kernel's
    real parameter layout instead, so this is only for code that uses it directly.)
    """

    __slots__ = ("_block", "_pointers", "ptr")

    def __init__(self, kernel_args: Any) -> None:
        values = [convert_arg(a) for a in kernel_args]
        raw = []
        for v in values:
            if isinstance(v, np.generic):
                raw.append(v.tobytes())
            elif isinstance(v, bool):
                raw.append(bytes([int(v)]))
            elif isinstance(v, int):
                raw.append(int(v).to_bytes(8, "little", signed=v < 0))
            elif isinstance(v, float):
                raw.append(np.float64(v).tobytes())
            else:
                raw.append(int(v.ptr).to_bytes(8, "little"))
        offsets = []
        size = 0
        for r in raw:
            align = min(len(r), 8) or 1
            size = (size + align - 1) // align * align
            offsets.append(size)
            size += len(r)
        self._block = ctypes.create_string_buffer(max(size, 1))
        base = ctypes.addressof(self._block)
        for off, r in zip(offsets, raw):
            ctypes.memmove(base + off, r, len(r))
        self._pointers = (ctypes.c_void_p * max(len(raw), 1))(*[base + off for off in offsets])
        self.ptr = ctypes.addressof(self._pointers)
