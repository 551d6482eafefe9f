"""pycuda.gpuarray, the part below the array layer: the CUDA vector types (`vec`).

`vec.float3`, `vec.int2`, ... are numpy structured dtypes with fields x, y,
z, w (registered with `tools.dtype_to_ctype` under their CUDA names), and
`vec.make_float3(1, 2, 3)` builds a 0-d array of one.  `GPUArray` and the
array functions are not provided: this surface stops at the driver.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from .tools import get_or_register_dtype

__all__ = ["vec"]


class vec:
    """The CUDA vector types as numpy dtypes, and their `make_<type>` constructors."""


def _maker(name: str, dtype: np.dtype) -> Any:
    fields = dtype.names or ()

    def make(*values: Any, **named: Any) -> np.ndarray:
        try:
            values = values + tuple(named.pop(f) for f in fields[len(values):] if named)
        except KeyError as exc:
            raise TypeError(f"make_{name}() missing argument {exc}") from None
        if named or len(values) != len(fields):
            raise TypeError(f"make_{name}() takes {len(fields)} values ({', '.join(fields)})")
        return np.array(tuple(values), dtype=dtype)

    make.__name__ = f"make_{name}"
    return staticmethod(make)


def _create_vector_types() -> None:
    wide = struct.calcsize("@P") == 8
    long_dtype, ulong_dtype = (np.int64, np.uint64) if wide else (np.int32, np.uint32)
    fields = ["x", "y", "z", "w"]
    for base_name, base_type, counts in [
        ("char", np.int8, [1, 2, 3, 4]), ("uchar", np.uint8, [1, 2, 3, 4]),
        ("short", np.int16, [1, 2, 3, 4]), ("ushort", np.uint16, [1, 2, 3, 4]),
        ("int", np.int32, [1, 2, 3, 4]), ("uint", np.uint32, [1, 2, 3, 4]),
        ("long", long_dtype, [1, 2, 3, 4]), ("ulong", ulong_dtype, [1, 2, 3, 4]),
        ("longlong", np.int64, [1, 2]), ("ulonglong", np.uint64, [1, 2]),
        ("float", np.float32, [1, 2, 3, 4]), ("double", np.float64, [1, 2]),
    ]:
        for count in counts:
            name = f"{base_name}{count}"
            dtype = get_or_register_dtype(name, np.dtype([(fields[i], base_type) for i in range(count)]))
            setattr(vec, name, dtype)
            setattr(vec, "make_" + name, _maker(name, dtype))


_create_vector_types()

_ARRAY_LAYER = {"GPUArray", "to_gpu", "to_gpu_async", "empty", "zeros", "empty_like", "zeros_like", "arange",
                "take", "multi_take", "if_positive", "maximum", "minimum", "sum", "dot", "vdot", "concatenate"}


def __getattr__(name: str) -> Any:
    if name in _ARRAY_LAYER:
        raise AttributeError(f"pycuda.gpuarray.{name} is not provided by ironaccel's PyCUDA surface (driver level "
                             "only): use ironaccel_cuda DeviceBuf, CuPy or PyTorch for arrays")
    raise AttributeError(f"module 'pycuda.gpuarray' has no attribute {name!r}")
