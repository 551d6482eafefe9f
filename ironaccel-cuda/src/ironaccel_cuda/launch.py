"""Kernel argument packing, prepared once per (function, argument types).

The driver reads each kernel parameter through a `void*` in an array
(`kernelParams`).  For each new tuple of Python argument types we build, once:

* one contiguous argument block laid out like the kernel's own parameters
  (offsets and sizes from `cuFuncGetParamInfo`), and the `void*` array
  pointing into it;
* a `struct.Struct` that writes all values into the block in one C call;
* a small generated function that pulls the device pointer out of each
  DeviceBuf argument, checks it is reachable from the launching device, and
  calls `pack_into`.

A launch then costs a dict lookup, one `pack_into` and `cuLaunchKernel` with
the address of the prepared array.  Packers are per thread, so concurrent
launches of one function never share an argument block.

How Python values meet kernel parameters (size from the kernel, and where the
code says -- Program output or PTX text -- its PTX type):
DeviceBuf (or view) -> 8-byte device pointer; int -> 1/2/4/8-byte signed
integer (use numpy unsigned scalars for values that only fit unsigned), or the
float it equals for a floating-point parameter; float -> 2/4/8-byte IEEE float
(so `float a` takes a Python float as float32), refused for an integer one;
bool -> 1-byte bool or an integer; numpy scalar -> its own bytes, whose size
must match the parameter.  A raw device pointer is an int.
"""

from __future__ import annotations

import ctypes
import re
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._core import DeviceBuf
from .errors import closed, invalid

__all__ = ["ArgPacker", "build_packer", "param_layout_fallback", "ptx_param_types"]

_INT_CODES = {1: "b", 2: "h", 4: "i", 8: "q"}
_UINT_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}
_FLOAT_CODES = {2: "e", 4: "f", 8: "d"}


class ArgPacker:
    """A prepared argument block for one kernel and one tuple of argument types."""

    __slots__ = ("pack", "params", "_block", "_pointers", "fmt", "size", "kinds")

    def __init__(self, pack: Callable[[Sequence[Any]], None], params: int, block: Any, pointers: Any, fmt: str,
                 size: int, kinds: tuple[tuple[str, int, bool], ...] = ()):
        self.pack = pack  # pack(args) writes the values; raises struct.error/AttributeError/TypeError on bad input
        self.params = params  # address of the void* array (0 when the kernel takes no parameters)
        self._block = block
        self._pointers = pointers
        self.fmt = fmt
        self.size = size
        self.kinds = kinds  # per argument: (struct code, offset, is a buffer); the compiled launch reads it


_PTX_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\(([^)]*)\)")
_PTX_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)")


def ptx_param_types(ptx: str | bytes) -> dict[str, tuple[str, ...]]:
    """{kernel symbol: PTX type of each parameter ("u32", "f32", "b8", ...)} from PTX text's `.entry` lines."""
    text = ptx.decode(errors="replace") if isinstance(ptx, (bytes, bytearray)) else ptx
    return {m[1]: tuple(_PTX_PARAM.findall(m[2])) for m in _PTX_ENTRY.finditer(text)}


def _ptx_class(ptx_type: str | None) -> str | None:
    """"int" for PTX .u/.s types, "float" for .f16/.f32/.f64, None when the type says neither (.b, .pred...)."""
    if not ptx_type:
        return None
    if ptx_type[0] in "us" and ptx_type[1:].isdigit():
        return "int"
    if ptx_type[0] == "f" and ptx_type[1:].isdigit():
        return "float"
    return None


def _code_for(index: int, value: Any, size: int, op: str, name: str, ptx_type: str | None = None) -> tuple[str, str]:
    """(struct code, expression) for argument `index` of Python type type(value).

    Where the kernel's PTX parameter type is known (code from Program or PTX text), a Python float for an
    integer parameter is refused and a Python int for a floating-point one is converted to it.  A numpy
    scalar is always its own bytes (only the size must match): it says exactly what it means.
    """

    arg = f"a{index}"
    kind = type(value)
    param = _ptx_class(ptx_type)
    if param == "int" and kind is float:
        raise invalid(op, f"{name}: argument {index} is a float but the kernel parameter is .{ptx_type} "
                      "(an integer); pass an int or a numpy integer scalar")
    if param == "float" and kind is int:
        code = _FLOAT_CODES.get(size)
        if code is None:
            raise invalid(op, f"{name}: argument {index} is an int but the kernel parameter is {size} bytes")
        return code, f"float({arg})"
    if isinstance(value, DeviceBuf):
        if size != 8:
            raise invalid(op, f"{name}: argument {index} is a DeviceBuf (8-byte pointer) but the kernel parameter "
                          f"is {size} bytes")
        return "Q", f"{arg}.ptr"
    if kind is bool or kind is int:
        code = _INT_CODES.get(size)
        if code is None:
            raise invalid(op, f"{name}: argument {index} is an int but the kernel parameter is {size} bytes")
        return code, arg
    if kind is float:
        code = _FLOAT_CODES.get(size)
        if code is None:
            raise invalid(op, f"{name}: argument {index} is a float but the kernel parameter is {size} bytes")
        return code, arg
    if isinstance(value, np.generic):
        dt = value.dtype
        if dt.itemsize != size:
            raise invalid(op, f"{name}: argument {index} is {dt.name} ({dt.itemsize} bytes) but the kernel "
                          f"parameter is {size} bytes")
        if dt.kind == "f":
            return _FLOAT_CODES[size], arg
        if dt.kind == "i":
            return _INT_CODES[size], arg
        if dt.kind == "u":
            return _UINT_CODES[size], arg
        if dt.kind == "b":
            return "?", arg
        if dt.kind == "c":
            half = _FLOAT_CODES[size // 2]
            return half * 2, f"{arg}.real, {arg}.imag"
        raise invalid(op, f"{name}: argument {index} has unsupported numpy type {dt.name}")
    raise invalid(op, f"{name}: argument {index} has unsupported type {kind.__name__}; pass a DeviceBuf, int, "
                  "float or numpy scalar")


def param_layout_fallback(args: Sequence[Any]) -> tuple[tuple[int, int], ...]:
    """A natural-alignment layout guessed from the arguments, for drivers without cuFuncGetParamInfo.

    ints and floats are taken as 8 bytes (int64, double) here; numpy scalars as their own size.
    """

    layout = []
    offset = 0
    for value in args:
        if isinstance(value, DeviceBuf) or type(value) in (int, float, bool):
            size = 8
        elif isinstance(value, np.generic):
            size = value.dtype.itemsize
        else:
            size = 8
        align = min(size, 8) or 1
        offset = (offset + align - 1) // align * align
        layout.append((offset, size))
        offset += size
    return tuple(layout)


def build_packer(layout: Sequence[tuple[int, int]], args: Sequence[Any], *, ordinal: int, reachable: set[int],
                 name: str, op: str = "cuLaunchKernel", types: Sequence[str] | None = None) -> ArgPacker:
    """Prepare the argument block for `args` against the kernel's parameter `layout` [(offset, size)].

    `types`, when known, are the PTX types of the parameters (`ptx_param_types`): they catch a float passed
    for an integer parameter, which the sizes alone cannot.
    """

    if len(args) != len(layout):
        raise invalid(op, f"{name} takes {len(layout)} argument(s), got {len(args)}")
    if not layout:
        return ArgPacker(lambda args: None, 0, None, None, "", 0)
    fmt = ["<"]
    exprs = []
    checks = []
    kinds = []
    cursor = 0
    for i, ((offset, size), value) in enumerate(zip(layout, args)):
        if offset < cursor:
            raise invalid(op, f"{name}: overlapping parameter layout {list(layout)}")
        if offset > cursor:
            fmt.append(f"{offset - cursor}x")
        ptx_type = types[i] if types is not None and i < len(types) else None
        code, expr = _code_for(i, value, size, op, name, ptx_type)
        kinds.append((code, offset, isinstance(value, DeviceBuf)))
        fmt.append(code)
        exprs.append(expr)
        cursor = offset + size
        if isinstance(value, DeviceBuf):
            checks.append(f"    if a{i}._ordinal != ORDINAL and a{i}._ordinal not in REACHABLE: bad_device({i}, a{i})")
    total = (cursor + 7) // 8 * 8
    layout_struct = struct.Struct("".join(fmt))
    block = ctypes.create_string_buffer(max(total, layout_struct.size))
    base = ctypes.addressof(block)
    pointers = (ctypes.c_void_p * len(layout))(*[base + off for off, _ in layout])
    names = ", ".join(f"a{i}" for i in range(len(args)))
    trailing = "," if len(args) == 1 else ""
    source = "\n".join(
        ["def pack(args):", f"    {names}{trailing} = args", *checks,
         f"    PACK(BLOCK, 0, {', '.join(exprs)})"]
    )

    def bad_device(index: int, buf: Any) -> None:
        raise invalid(op, f"{name}: argument {index} is a buffer on cuda:{buf._ordinal} but the kernel runs on "
                      f"cuda:{ordinal} (enable_peer_access first to use peer memory)")

    namespace: dict[str, Any] = {
        "PACK": layout_struct.pack_into, "BLOCK": block, "ORDINAL": ordinal, "REACHABLE": reachable,
        "bad_device": bad_device,
    }
    exec(compile(source, f"<ironaccel_cuda packer for {name}>", "exec"), namespace)
    return ArgPacker(namespace["pack"], ctypes.addressof(pointers), block, pointers, layout_struct.format, total,
                     tuple(kinds))


def pack_error(args: Sequence[Any], exc: Exception, name: str, op: str = "cuLaunchKernel",
               packer: ArgPacker | None = None) -> Exception:
    """Explain why packing `args` failed (cold path); `packer`, the one that failed, tells which int did not fit."""

    if isinstance(exc, IndexError | ValueError) and "unpack" in str(exc):
        return invalid(op, f"{name}: wrong number of arguments ({len(args)})")
    for i, value in enumerate(args):
        if isinstance(value, DeviceBuf) and value.ptr is None:
            return closed(op, f"argument {i} (buffer)")
    kinds = packer.kinds if packer is not None else ()
    for i, value in enumerate(args):
        if type(value) is int and isinstance(exc, struct.error):
            if i < len(kinds) and _fits(kinds[i][0], value):
                continue
            return invalid(op, f"{name}: argument {i} = {value} does not fit its kernel parameter "
                           "(pass a numpy scalar of the parameter's type, e.g. np.uint32)")
    return invalid(op, f"{name}: could not pack arguments: {type(exc).__name__}: {exc}")


def _fits(code: str, value: int) -> bool:
    try:
        struct.pack("<" + code, value)
    except struct.error:
        return False
    return True
