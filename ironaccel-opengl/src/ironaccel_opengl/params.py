"""Packing of dispatch params: 32-bit scalars, tightly packed, as a std140 uniform block of scalars reads them.

In a std140 block, `float`/`int`/`uint` members sit at offsets 0, 4, 8, ...,
so params are packed as consecutive little-endian 32-bit words.  numpy scalars
keep their type; Python floats become float32, Python ints int32 (uint32 when
above the int32 range), bools uint32.  Anything else is rejected, because a
silent conversion (float64 to float32, say) would hide a caller's mistake.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.errors import InvalidArgument

BACKEND = "opengl"

#: struct codes by exact type: the hot path is one dict lookup per param and one struct.pack.
_CODES: dict[type, str] = {np.float32: "f", np.int32: "i", np.uint32: "I", float: "f", bool: "I"}


def pack_params(params: Sequence[Any], expected: int, op: str = "dispatch") -> bytes:
    """The bytes of `params`, or InvalidArgument if the count or a type is wrong."""
    if len(params) != expected:
        raise InvalidArgument(BACKEND, op, detail=f"the pipeline takes {expected} params, got {len(params)}")
    codes = []
    for index, value in enumerate(params):
        code = _CODES.get(type(value))
        if code is None:
            if type(value) is int:
                code = "i" if value < 2**31 else "I"
            else:
                raise InvalidArgument(BACKEND, op, detail=f"param {index} is {type(value).__name__}; params are "
                                      "32-bit scalars (np.float32, np.int32, np.uint32, float, int)")
        codes.append(code)
    try:
        return struct.pack("<" + "".join(codes), *params)
    except (struct.error, OverflowError) as exc:
        raise InvalidArgument(BACKEND, op, detail=f"params {tuple(params)!r} do not fit 32 bits: {exc}") from None
