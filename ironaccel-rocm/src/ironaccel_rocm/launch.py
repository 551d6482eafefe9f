"""Kernel arguments packed against the kernel's parameter layout, by the CUDA backend's rules.

The layout is the code object's metadata (`codeobject.kernel_args`): offset and size of each explicit
argument.  A device allocation is its 8-byte pointer; a Python int or bool fills an integer parameter of its
size, a Python float a floating-point one (4 bytes: float32, 8: float64); a numpy scalar is its own bytes and
must have the parameter's size.  Anything else, a wrong count, a size that does not match, an int that does
not fit, or an allocation of another device is InvalidArgument naming hipModuleLaunchKernel.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.errors import ClosedError, InvalidArgument

from .binding import BACKEND
from .codeobject import KernelArg

OP = "hipModuleLaunchKernel"
_INT = {1: "b", 2: "h", 4: "i", 8: "q"}
_UINT = {1: "B", 2: "H", 4: "I", 8: "Q"}
_FLOAT = {2: "e", 4: "f", 8: "d"}


def _bad(detail: str) -> InvalidArgument:
    return InvalidArgument(BACKEND, OP, detail=detail)


class Packed:
    """An argument block and the kernelParams array of pointers into it (kept alive with the launch)."""

    __slots__ = ("block", "pointers", "address")

    def __init__(self, layout: Sequence[KernelArg], values: Sequence[bytes]):
        end = max((a.offset + a.size for a in layout), default=0)
        self.block = ctypes.create_string_buffer(max(end, 1))
        for arg, raw in zip(layout, values):
            ctypes.memmove(ctypes.addressof(self.block) + arg.offset, raw, arg.size)
        base = ctypes.addressof(self.block)
        self.pointers = (ctypes.c_void_p * max(len(layout), 1))(*[base + a.offset for a in layout])
        self.address = ctypes.addressof(self.pointers)


def pack(layout: Sequence[KernelArg], args: Sequence[Any], name: str, device: Any, memory_type: type[Any]) -> Packed:
    """The block for `args` against `layout`; `device` is the HipDevice the kernel runs on, `memory_type` its
    DeviceMemory class (passed in so this module does not import device.py, which imports it)."""
    if len(args) != len(layout):
        raise _bad(f"kernel {name!r} takes {len(layout)} argument(s), got {len(args)}")
    values = []
    for i, (arg, value) in enumerate(zip(layout, args)):
        kind = type(value)
        where = f"kernel {name!r} argument {i}"
        if isinstance(value, memory_type):
            if value.device is not device:
                raise _bad(f"{where} is memory of another device ({value.device!r})")
            if value.closed:
                raise ClosedError(BACKEND, OP, f"argument {i} (memory)")
            code, value = "Q", value.ptr
        elif arg.pointer:
            raise _bad(f"{where} is a device pointer; pass a DeviceMemory of this device, got {kind.__name__}")
        elif kind is bool or kind is int:
            code = _INT.get(arg.size, "")
        elif kind is float:
            code = _FLOAT.get(arg.size, "")
        elif isinstance(value, np.generic) and value.dtype.kind in "biuf":
            if value.dtype.itemsize != arg.size:
                raise _bad(f"{where} is {value.dtype.name} ({value.dtype.itemsize} bytes) but the parameter is "
                           f"{arg.size} bytes")
            values.append(value.tobytes())
            continue
        else:
            raise _bad(f"{where} has unsupported type {kind.__name__}; pass a DeviceMemory, int, float or numpy "
                       "scalar")
        if not code or struct.calcsize("<" + code) != arg.size:
            raise _bad(f"{where} is a {kind.__name__} but the parameter is {arg.size} bytes")
        try:
            values.append(struct.pack("<" + code, value))
        except struct.error:
            if code in _INT.values():
                try:
                    values.append(struct.pack("<" + code.upper(), value))  # an unsigned value above int range
                    continue
                except struct.error:
                    pass
            raise _bad(f"{where} = {value!r} does not fit its {arg.size}-byte parameter") from None
    return Packed(layout, values)
