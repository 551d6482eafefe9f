"""Element types: ironaccel `DType` / numpy dtype <-> `PJRT_Buffer_Type`.

Every type PJRT and numpy share is mapped; bfloat16 goes through numpy via
`ml_dtypes` when that package is installed (as `DType.BFLOAT16.numpy` does).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ironaccel.errors import InvalidArgument
from ironaccel.types import DType

from .api import BACKEND
from .capi import BUFFER_TYPE, BUFFER_TYPES

__all__ = ["to_pjrt", "from_pjrt", "SUPPORTED"]

_TO_PJRT = {
    DType.BOOL: BUFFER_TYPE["PRED"],
    DType.INT8: BUFFER_TYPE["S8"],
    DType.INT16: BUFFER_TYPE["S16"],
    DType.INT32: BUFFER_TYPE["S32"],
    DType.INT64: BUFFER_TYPE["S64"],
    DType.UINT8: BUFFER_TYPE["U8"],
    DType.UINT16: BUFFER_TYPE["U16"],
    DType.UINT32: BUFFER_TYPE["U32"],
    DType.UINT64: BUFFER_TYPE["U64"],
    DType.FLOAT16: BUFFER_TYPE["F16"],
    DType.BFLOAT16: BUFFER_TYPE["BF16"],
    DType.FLOAT32: BUFFER_TYPE["F32"],
    DType.FLOAT64: BUFFER_TYPE["F64"],
    DType.COMPLEX64: BUFFER_TYPE["C64"],
    DType.COMPLEX128: BUFFER_TYPE["C128"],
}
_FROM_PJRT = {v: k for k, v in _TO_PJRT.items()}

#: Every DType this backend moves to and from devices.
SUPPORTED = tuple(_TO_PJRT)

# numpy dtype -> (DType, PJRT type), filled lazily; the hot path is one dict lookup.
_BY_NUMPY: dict[np.dtype, tuple[DType, int]] = {}


def to_pjrt(dtype: Any, op: str) -> tuple[DType, int]:
    """(DType, PJRT_Buffer_Type) for a numpy dtype or DType; InvalidArgument naming `op` if PJRT has none."""
    if isinstance(dtype, np.dtype):
        hit = _BY_NUMPY.get(dtype)
        if hit is not None:
            return hit
    try:
        dt = DType.of(dtype)
    except TypeError:
        raise InvalidArgument(BACKEND, op, detail=(
            f"dtype {dtype!r} has no PJRT element type; supported: {', '.join(d.value for d in SUPPORTED)}"
        )) from None
    result = (dt, _TO_PJRT[dt])
    if isinstance(dtype, np.dtype):
        _BY_NUMPY[dtype] = result
    return result


def from_pjrt(pjrt_type: int, op: str) -> DType:
    """The DType of a PJRT_Buffer_Type; InvalidArgument for types numpy cannot hold (F8, S4, TOKEN...)."""
    dt = _FROM_PJRT.get(pjrt_type)
    if dt is None:
        name = BUFFER_TYPES[pjrt_type] if 0 <= pjrt_type < len(BUFFER_TYPES) else str(pjrt_type)
        raise InvalidArgument(BACKEND, op, detail=f"PJRT element type {name} has no numpy dtype here")
    return dt
