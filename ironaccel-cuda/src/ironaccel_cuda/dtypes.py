"""Element types accepted by allocations: anything `DType.of` understands, memoised.

`spec(dtype, op)` returns `(DType, numpy dtype, itemsize)`; `SPECS` is the memo
that the hot allocation paths read directly (a dict hit for the usual names).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ironaccel import DType

from .errors import invalid

__all__ = ["SPECS", "spec"]

SPECS: dict[Any, tuple[DType, np.dtype, int]] = {}


def spec(dtype: Any, op: str) -> tuple[DType, np.dtype, int]:
    """(DType, numpy dtype, itemsize) for `dtype`; InvalidArgument naming `op` if it is not a known type."""
    try:
        found = SPECS.get(dtype)
    except TypeError:
        found = None
    if found is not None:
        return found
    try:
        dt = DType.of(dtype)
        npdt = dt.numpy
    except TypeError as exc:
        raise invalid(op, str(exc)) from None
    found = (dt, npdt, int(npdt.itemsize))
    try:
        SPECS[dtype] = found
    except TypeError:
        pass
    return found
