"""Specialization constants of CUDA C++ kernels: NVRTC defines (-D) over guarded defaults.

A kernel declares a constant with its default under its own guard::

    #ifndef SCALE
    #define SCALE 1.0f
    #endif

and `device.pipeline(code, ..., constants={"SCALE": 2.5})` compiles it with
``-DSCALE=2.5f``: the guard keeps the default out, and the kernel is one
NVRTC compile (and one module) per constant set.  The default's literal gives
the constant's type (``1.0f`` float32, ``1.0`` float64, ``3`` int32, ``3u``
uint32, ``3ll`` int64, ``3ull`` uint64, ``true`` bool), which a value must fit.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ironaccel import DType
from ironaccel.compute.params import ConstantInfo

from .errors import invalid

__all__ = ["declared_constants", "defines", "without_defaults"]

_DEFAULT = re.compile(r"^[ \t]*#[ \t]*ifndef[ \t]+(\w+)[ \t]*\n[ \t]*#[ \t]*define[ \t]+\1[ \t]+([^\n]+?)[ \t]*\n"
                      r"[ \t]*#[ \t]*endif[^\n]*$", re.M)
_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|\d+)([uU]?)((?:ll|LL)?)([uU]?)")
_FLOAT = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?([fF]?)")
_RANGES = {DType.INT32: (-(1 << 31), 1 << 31), DType.UINT32: (0, 1 << 32), DType.INT64: (-(1 << 63), 1 << 63),
           DType.UINT64: (0, 1 << 64)}
_SUFFIX = {DType.INT32: "", DType.UINT32: "u", DType.INT64: "ll", DType.UINT64: "ull"}


def _literal(text: str) -> tuple[DType | None, Any]:
    """(type, value) of a C++ literal default; (None, text) for an expression ironaccel does not read."""
    bare = text.strip().strip("()").strip()
    if bare in ("true", "false"):
        return DType.BOOL, bare == "true"
    match = _INT.fullmatch(bare)
    if match:
        unsigned = bool(match.group(2) or match.group(4))
        wide = bool(match.group(3))
        digits = bare[: match.end(1)]
        body = digits.lstrip("+-")
        octal = len(body) > 1 and body[0] == "0" and body[1] in "01234567"
        try:
            value = int(digits, 8) if octal else int(digits, 0)
        except ValueError:
            return None, text
        kind = {(False, False): DType.INT32, (True, False): DType.UINT32, (False, True): DType.INT64,
                (True, True): DType.UINT64}[(unsigned, wide)]
        return kind, value
    match = _FLOAT.fullmatch(bare)
    if match:
        return (DType.FLOAT32 if match.group(3) else DType.FLOAT64), float(bare.rstrip("fF"))
    return None, text


def declared_constants(code: str) -> list[ConstantInfo]:
    """The constants CUDA C++ code declares: a default under its own guard (#ifndef / #define / #endif)."""
    found = []
    for match in _DEFAULT.finditer(code):
        dtype, value = _literal(match.group(2))
        found.append(ConstantInfo(match.group(1), None, dtype, value))
    return found


def without_defaults(code: str) -> str:
    """The code without its guarded defaults (what the by-value argument reader `c_params` is given)."""
    return _DEFAULT.sub("", code)


def _text(name: Any, value: Any, dtype: DType | None) -> str:
    """`value` as a C++ literal of the constant's type (InvalidArgument where it does not fit)."""
    def refuse(why: str) -> Exception:
        return invalid("pipeline", f"constant {name!r} is {dtype.value if dtype else 'untyped'}: {why}")

    if isinstance(value, (bool, np.bool_)):
        if dtype not in (None, DType.BOOL):
            raise refuse(f"got {value!r}")
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        if dtype is DType.BOOL:
            raise refuse(f"got {value!r}")
        if dtype in (DType.FLOAT32, DType.FLOAT64):
            return _float_text(float(value), dtype)
        kind = DType.INT32 if dtype is None else dtype
        low, high = _RANGES[kind]
        if not low <= int(value) < high:
            raise refuse(f"{value!r} is out of its range")
        if int(value) == low and low < 0:  # -2147483648 is not a literal: write it as an expression
            return f"({low + 1}{_SUFFIX[kind]} - 1)"
        return f"{int(value)}{_SUFFIX[kind]}"
    if isinstance(value, (float, np.floating)):
        if dtype not in (None, DType.FLOAT32, DType.FLOAT64):
            raise refuse(f"got {value!r}")
        if not math.isfinite(float(value)):
            raise refuse(f"{value!r} is not finite")
        return _float_text(float(value), DType.FLOAT32 if dtype is None else dtype)
    raise invalid("pipeline", f"constant {name!r} must be a bool, int or float, got {value!r}")


def _float_text(value: float, dtype: DType) -> str:
    if dtype is DType.FLOAT32:
        if abs(value) > float(np.finfo(np.float32).max):
            raise invalid("pipeline", f"{value!r} does not fit a float32")
        return f"{float(np.float32(value))!r}f"
    return repr(value)


def defines(kind: str, code: Any, constants: dict[Any, Any]) -> tuple[dict[str, str], list[ConstantInfo]]:
    """(NVRTC defines for `constants`, the constants the code declares); InvalidArgument for a constant the code
    does not declare, a value of another type, or code that is not CUDA C++ source."""
    if kind != "c++":
        if constants:
            raise invalid("pipeline", "constants specialize CUDA C++ source (compiled by NVRTC); PTX and module "
                          "images are already compiled")
        return {}, []
    declared = declared_constants(code)
    by_name = {c.name: c for c in declared}
    found = {}
    for name, value in constants.items():
        info = by_name.get(str(name))
        if info is None:
            raise invalid("pipeline", f"the code declares no constant {name!r} (it has {', '.join(by_name) or 'none'}"
                          "; declare one as #ifndef NAME / #define NAME default / #endif)")
        found[str(name)] = _text(name, value, info.dtype)
    return found, declared
