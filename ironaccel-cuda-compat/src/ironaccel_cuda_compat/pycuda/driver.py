"""pycuda.driver: the driver-level API (everything of `_driver`) and PyCUDA's Python helpers on top.

See the package docstring for the coverage map.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._driver import *  # noqa: F403
from ._driver import ManagedAllocation, _missing, array_format, pagelocked_empty
from ._driver import __all__ as _driver_all
from ._errors import CompileError, bad_input, invalid
from ._memory import aligned_empty, managed_empty, mem_alloc, memcpy_dtoh, memcpy_htod
from ._module import ArgumentHandler, In, InOut, Out

ManagedAllocationOrStub = ManagedAllocation

CUDA_DEBUGGING = False


def set_debugging(flag: bool = True) -> None:
    """Compile with device debug information (-G) and keep the compiler's files."""
    global CUDA_DEBUGGING
    CUDA_DEBUGGING = flag


# -- page-locked, aligned and managed numpy arrays -----------------------------------------


def _order_of(array: np.ndarray) -> str:
    if not isinstance(array, np.ndarray):
        raise invalid("empty_like", f"expected a numpy array, not {type(array).__name__}", TypeError)
    if array.flags.c_contiguous:
        return "C"
    if array.flags.f_contiguous:
        return "F"
    raise invalid("empty_like", "could not detect array order", ValueError)


def pagelocked_zeros(shape: Any, dtype: Any, order: str = "C", mem_flags: int = 0) -> np.ndarray:
    result = pagelocked_empty(shape, dtype, order, mem_flags)
    result.fill(0)
    return result


def pagelocked_empty_like(array: np.ndarray, mem_flags: int = 0) -> np.ndarray:
    order = _order_of(array)
    return pagelocked_empty(array.shape, array.dtype, order, mem_flags)


def pagelocked_zeros_like(array: np.ndarray, mem_flags: int = 0) -> np.ndarray:
    result = pagelocked_empty_like(array, mem_flags)
    result.fill(0)
    return result


def aligned_zeros(shape: Any, dtype: Any, order: str = "C", alignment: int = 4096) -> np.ndarray:
    result = aligned_empty(shape, dtype, order, alignment)
    result.fill(0)
    return result


def aligned_empty_like(array: np.ndarray, alignment: int = 4096) -> np.ndarray:
    order = _order_of(array)
    return aligned_empty(array.shape, array.dtype, order, alignment)


def aligned_zeros_like(array: np.ndarray, alignment: int = 4096) -> np.ndarray:
    result = aligned_empty_like(array, alignment)
    result.fill(0)
    return result


def managed_zeros(shape: Any, dtype: Any, order: str = "C", mem_flags: int = 0) -> np.ndarray:
    result = managed_empty(shape, dtype, order, mem_flags)
    result.fill(0)
    return result


def managed_empty_like(array: np.ndarray, mem_flags: int = 0) -> np.ndarray:
    order = _order_of(array)
    return managed_empty(array.shape, array.dtype, order, mem_flags)


def managed_zeros_like(array: np.ndarray, mem_flags: int = 0) -> np.ndarray:
    result = managed_empty_like(array, mem_flags)
    result.fill(0)
    return result


def mem_alloc_like(ary: Any) -> Any:
    try:
        nbytes = ary.nbytes
    except AttributeError:
        raise invalid("mem_alloc_like", f"expected an array, not {type(ary).__name__}", TypeError) from None
    return mem_alloc(nbytes)


# -- device copies ---------------------------------------------------------------------------


def to_device(bf_obj: Any) -> Any:
    """A new allocation holding the bytes of buffer `bf_obj` (C order)."""
    try:
        view = memoryview(bf_obj)
    except TypeError as exc:
        raise bad_input("to_device", exc) from None
    data: Any = view if view.c_contiguous else view.tobytes()
    result = mem_alloc(view.nbytes)
    memcpy_htod(result, data)
    return result


def from_device(devptr: Any, shape: Any, dtype: Any, order: str = "C") -> np.ndarray:
    try:
        result: np.ndarray = np.empty(shape, dtype, order)  # type: ignore[call-overload]
    except (TypeError, ValueError) as exc:
        raise bad_input("from_device", exc) from None
    memcpy_dtoh(result, devptr)
    return result


def from_device_like(devptr: Any, other_ary: np.ndarray) -> np.ndarray:
    try:
        result = np.empty_like(other_ary)
    except (TypeError, ValueError) as exc:
        raise bad_input("from_device_like", exc) from None
    memcpy_dtoh(result, devptr)
    return result


# -- CUDA arrays (not provided) ------------------------------------------------------------------


def dtype_to_array_format(dtype: Any) -> Any:
    try:
        dtype = np.dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise bad_input("dtype_to_array_format", exc) from None
    table = {np.dtype(np.uint8): "UNSIGNED_INT8", np.dtype(np.uint16): "UNSIGNED_INT16",
             np.dtype(np.uint32): "UNSIGNED_INT32", np.dtype(np.int8): "SIGNED_INT8",
             np.dtype(np.int16): "SIGNED_INT16", np.dtype(np.int32): "SIGNED_INT32", np.dtype(np.float32): "FLOAT"}
    try:
        return array_format[table[dtype]]
    except KeyError:
        raise invalid("dtype_to_array_format", f"cannot convert dtype '{dtype}' to array format",
                      TypeError) from None


matrix_to_array = _missing("matrix_to_array")
np_to_array = _missing("np_to_array")
gpuarray_to_array = _missing("gpuarray_to_array")
make_multichannel_2d_array = _missing("make_multichannel_2d_array")
bind_array_to_texref = _missing("bind_array_to_texref")
matrix_to_texref = _missing("matrix_to_texref")

__all__ = [
    *_driver_all, "ManagedAllocationOrStub", "CUDA_DEBUGGING", "set_debugging", "CompileError", "ArgumentHandler",
    "In", "Out", "InOut", "pagelocked_zeros", "pagelocked_empty_like", "pagelocked_zeros_like", "aligned_zeros",
    "aligned_empty_like", "aligned_zeros_like", "managed_zeros", "managed_empty_like", "managed_zeros_like",
    "mem_alloc_like", "to_device", "from_device", "from_device_like", "dtype_to_array_format", "matrix_to_array",
    "np_to_array", "gpuarray_to_array", "make_multichannel_2d_array", "bind_array_to_texref", "matrix_to_texref",
]
