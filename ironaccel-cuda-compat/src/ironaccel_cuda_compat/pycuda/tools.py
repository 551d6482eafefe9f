"""pycuda.tools: default contexts, test decoration, memory pools, dtype names, device data and occupancy."""

from __future__ import annotations

import gc
import os
import struct
from collections.abc import Callable, Sequence
from functools import update_wrapper
from typing import Any

import numpy as np

from . import driver as cuda
from ._pools import DeviceMemoryPool, PageLockedAllocator, PageLockedMemoryPool, bitlog2

__all__ = [
    "bitlog2", "DeviceMemoryPool", "PageLockedMemoryPool", "PageLockedAllocator", "make_default_context",
    "get_default_device", "DeviceData", "OccupancyRecord", "dtype_to_ctype", "get_or_register_dtype",
    "register_dtype", "TypeNameNotKnown", "Argument", "VectorArg", "ScalarArg", "parse_c_arg", "get_arg_type",
    "context_dependent_memoize", "clear_context_caches", "mark_cuda_test", "init_cuda_context_fixture",
]


# -- default device and context ------------------------------------------------------------


def _configured_device() -> str | None:
    devn = os.environ.get("CUDA_DEVICE")
    if devn is None:
        try:
            with open(os.path.join(os.environ.get("HOME", ""), ".cuda_device")) as devrc:
                devn = devrc.read().strip()
        except OSError:
            pass
    return devn


def get_default_device(default: int = 0) -> Any:
    """Deprecated in PyCUDA: the device CUDA_DEVICE / ~/.cuda_device name, else `default`."""
    import warnings

    warnings.warn("get_default_device() is deprecated; use make_default_context() instead", DeprecationWarning,
                  stacklevel=2)
    devn = _configured_device()
    return cuda.Device(int(devn) if devn is not None else default)


def make_default_context(ctx_maker: Callable[[Any], Any] | None = None) -> Any:
    """A context on the device CUDA_DEVICE or ~/.cuda_device names, else on the first device that takes one."""
    if ctx_maker is None:
        def ctx_maker(dev: Any) -> Any:
            return dev.make_context()

    ndevices = cuda.Device.count()
    if ndevices == 0:
        raise RuntimeError("No CUDA enabled device found. Please check your installation.")
    devn = _configured_device()
    if devn is not None:
        try:
            ordinal = int(devn)
        except ValueError:
            raise TypeError("CUDA device number (CUDA_DEVICE or ~/.cuda_device) must be an integer") from None
        return ctx_maker(cuda.Device(ordinal))
    for ordinal in range(ndevices):
        try:
            return ctx_maker(cuda.Device(ordinal))
        except cuda.Error:
            pass
    raise RuntimeError(f"make_default_context() wasn't able to create a context on any of the {ndevices} "
                       "detected devices")


# -- dtype names -----------------------------------------------------------------------------


class TypeNameNotKnown(RuntimeError):
    pass


class _Registry:
    def __init__(self) -> None:
        self.dtype_to_name: dict[Any, str] = {}
        self.name_to_dtype: dict[str, np.dtype] = {}

    def get_or_register_dtype(self, names: str | Sequence[str], dtype: Any = None) -> np.dtype:
        if isinstance(names, str):
            names = [names]
        if dtype is None:
            found = {self.name_to_dtype[n] for n in names if n in self.name_to_dtype}
            if len(found) != 1:
                raise TypeNameNotKnown(f"no single dtype registered for {list(names)}")
            return found.pop()
        dtype = np.dtype(dtype)
        existing = self.dtype_to_name.get(dtype)
        if existing is not None:
            dtype = self.name_to_dtype[existing]
        for name in names:
            known = self.name_to_dtype.setdefault(name, dtype)
            if known != dtype:
                raise RuntimeError(f"name '{name}' already registered to different dtype")
        if existing is None:
            self.dtype_to_name[dtype] = names[0]
        self.dtype_to_name.setdefault(str(dtype), names[0])
        return dtype

    def dtype_to_ctype(self, dtype: Any) -> str:
        if dtype is None:
            raise ValueError("dtype may not be None")
        dtype = np.dtype(dtype)
        try:
            return self.dtype_to_name[dtype]
        except KeyError:
            raise ValueError(f"unable to map dtype '{dtype}'") from None


_registry = _Registry()
get_or_register_dtype = _registry.get_or_register_dtype
register_dtype = _registry.get_or_register_dtype


def _fill_registry() -> None:
    reg = get_or_register_dtype
    reg("bool", np.bool_)
    reg(["signed char", "char"], np.int8)
    reg("unsigned char", np.uint8)
    reg(["short", "signed short", "signed short int", "short signed int"], np.int16)
    reg(["unsigned short", "unsigned short int", "short unsigned int"], np.uint16)
    reg(["int", "signed int"], np.int32)
    reg(["unsigned", "unsigned int"], np.uint32)
    if struct.calcsize("@P") * 8 == 64:
        reg(["long", "long int", "signed long int", "long signed int"], np.int64)
        reg(["unsigned long", "unsigned long int", "long unsigned int"], np.uint64)
    reg("float", np.float32)
    reg("double", np.float64)
    reg("pycuda::complex<float>", np.complex64)
    reg("pycuda::complex<double>", np.complex128)


_fill_registry()


def dtype_to_ctype(dtype: Any, with_fp_tex_hack: bool = False) -> str:
    """The C type name of `dtype` ("float", "unsigned int", "float3", ...)."""
    if dtype is None:
        raise ValueError("dtype may not be None")
    dtype = np.dtype(dtype)
    if with_fp_tex_hack:
        hack = {np.dtype(np.float32): "fp_tex_float", np.dtype(np.float64): "fp_tex_double",
                np.dtype(np.complex64): "fp_tex_cfloat", np.dtype(np.complex128): "fp_tex_cdouble"}.get(dtype)
        if hack:
            return hack
    return _registry.dtype_to_ctype(dtype)


class Argument:
    def __init__(self, dtype: Any, name: str):
        self.dtype = np.dtype(dtype)
        self.name = name

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.name!r}, {self.dtype})"


class VectorArg(Argument):
    struct_char = "P"

    def declarator(self) -> str:
        return f"{dtype_to_ctype(self.dtype)} *{self.name}"


class ScalarArg(Argument):
    def declarator(self) -> str:
        return f"{dtype_to_ctype(self.dtype)} {self.name}"

    @property
    def struct_char(self) -> str:
        char = self.dtype.char
        return f"{self.dtype.itemsize}s" if char == "V" else char


def parse_c_arg(c_arg: str) -> Argument:
    """A VectorArg (pointer) or ScalarArg from a C declaration like "float *x" or "unsigned n"."""
    text = c_arg
    for qualifier in ("const", "volatile", "__restrict__", "restrict"):
        text = text.replace(qualifier, "")
    if "*" in text:
        tp, name = text.split("*", 1)
        return VectorArg(get_or_register_dtype(" ".join(tp.split())), name.strip())
    parts = text.split()
    return ScalarArg(get_or_register_dtype(" ".join(parts[:-1])), parts[-1])


def get_arg_type(c_arg: str) -> str:
    return parse_c_arg(c_arg).struct_char  # type: ignore[attr-defined, no-any-return]


# -- device data and occupancy -----------------------------------------------------------------


def _ceil(value: float, multiple_of: int = 1) -> int:
    from math import ceil

    return int(ceil(value / multiple_of) * multiple_of)


def _floor(value: float, multiple_of: int = 1) -> int:
    from math import floor

    return int(floor(value / multiple_of) * multiple_of)


class DeviceData:
    """Limits of a device used by occupancy estimates (PyCUDA's table of them)."""

    def __init__(self, dev: Any = None):
        if dev is None:
            dev = cuda.Context.get_device()
        attr = cuda.device_attribute
        cc = dev.compute_capability()
        self.max_threads = dev.get_attribute(attr.MAX_THREADS_PER_BLOCK)
        self.warp_size = dev.get_attribute(attr.WARP_SIZE)
        self.warps_per_mp = 64 if cc >= (3, 0) else 48 if cc >= (2, 0) else 32 if cc >= (1, 2) else 24
        self.thread_blocks_per_mp = 8
        self.registers = dev.get_attribute(attr.MAX_REGISTERS_PER_BLOCK)
        self.shared_memory = dev.get_attribute(attr.MAX_SHARED_MEMORY_PER_BLOCK)
        self.smem_alloc_granularity, self.smem_granularity = (128, 32) if cc >= (2, 0) else (512, 16)
        self.register_allocation_unit = "warp" if cc >= (2, 0) else "block"

    def align(self, bytes: int, word_size: int = 4) -> int:
        return _ceil(bytes, self.align_bytes(word_size))

    def align_dtype(self, elements: int, dtype_size: int) -> int:
        return _ceil(elements, self.align_words(dtype_size))

    def align_words(self, word_size: int) -> int:
        quot, rem = divmod(self.align_bytes(word_size), word_size)
        assert rem == 0
        return quot

    def align_bytes(self, word_size: int = 4) -> int:
        if word_size == 4:
            return 64
        if word_size in (8, 16):
            return 128
        raise ValueError(f"no alignment possible for fetches of size {word_size}")

    def coalesce(self, thread_count: int) -> int:
        return _ceil(thread_count, 16)

    @staticmethod
    def make_valid_tex_channel_count(size: int) -> int:
        for valid in (1, 2, 4):
            if size <= valid:
                return valid
        raise ValueError("could not enlarge argument to valid channel count")


class OccupancyRecord:
    """Blocks and warps per multiprocessor for a block of `threads` using `shared_mem` and `registers`."""

    def __init__(self, devdata: DeviceData, threads: int, shared_mem: int = 0, registers: int = 0):
        if threads <= 0:
            raise ValueError(f"a block needs at least one thread, got {threads}")
        if threads > devdata.max_threads:
            raise ValueError("too many threads")
        alloc_warps = _ceil(threads / devdata.warp_size)
        alloc_smem = _ceil(shared_mem, devdata.smem_alloc_granularity)
        if devdata.register_allocation_unit == "warp":
            alloc_regs = alloc_warps * 32 * registers
        elif devdata.register_allocation_unit == "block":
            alloc_regs = _ceil(alloc_warps * 2, 4) * 16 * registers
        else:
            raise ValueError("Improper register allocation unit:" + devdata.register_allocation_unit)
        if alloc_regs > devdata.registers:
            raise ValueError("too many registers")
        if alloc_smem > devdata.shared_memory:
            raise ValueError("too much smem")
        self.tb_per_mp_limits = [(devdata.thread_blocks_per_mp, "device"),
                                 (_floor(devdata.warps_per_mp / alloc_warps), "warps")]
        if registers > 0:
            self.tb_per_mp_limits.append((_floor(devdata.registers / alloc_regs), "regs"))
        if shared_mem > 0:
            self.tb_per_mp_limits.append((_floor(devdata.shared_memory / alloc_smem), "smem"))
        self.tb_per_mp, self.limited_by = min(self.tb_per_mp_limits)
        self.warps_per_mp = self.tb_per_mp * alloc_warps
        self.occupancy = self.warps_per_mp / devdata.warps_per_mp


# -- per-context memoization -------------------------------------------------------------------

context_dependent_memoized_functions: list[Any] = []


def context_dependent_memoize(func: Callable[..., Any]) -> Callable[..., Any]:
    """Cache `func`'s results per (current context, arguments)."""
    cache: dict[Any, dict[Any, Any]] = {}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        key = (args, frozenset(kwargs.items())) if kwargs else (args,)
        per_ctx = cache.setdefault(cuda.Context.get_current(), {})
        try:
            return per_ctx[key]
        except KeyError:
            context_dependent_memoized_functions.append(wrapper)
            result = per_ctx[key] = func(*args, **kwargs)
            return result

    wrapper._pycuda_ctx_dep_memoize_dic = cache  # type: ignore[attr-defined]
    update_wrapper(wrapper, func)
    return wrapper


def clear_context_caches() -> None:
    for func in context_dependent_memoized_functions:
        cache = getattr(func, "_pycuda_ctx_dep_memoize_dic", None)
        if cache is not None:
            cache.clear()


# -- tests -------------------------------------------------------------------------------------


def mark_cuda_test(inner_f: Callable[..., Any]) -> Callable[..., Any]:
    """Run the test in a fresh default context, popped (and caches cleared) afterwards."""

    def f(*args: Any, **kwargs: Any) -> Any:
        cuda.init()
        ctx = make_default_context()
        try:
            assert isinstance(ctx.get_device().name(), str)
            assert isinstance(ctx.get_device().compute_capability(), tuple)
            assert isinstance(ctx.get_device().get_attributes(), dict)
            return inner_f(*args, **kwargs)
        finally:
            ctx.pop()
            clear_context_caches()
            gc.collect()

    update_wrapper(f, inner_f)
    try:
        import pytest
    except ImportError:
        return f
    import warnings

    with warnings.catch_warnings():  # PyCUDA marks its tests "cuda" without registering the mark
        warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
        return pytest.mark.cuda(f)  # type: ignore[no-any-return]


def init_cuda_context_fixture() -> Any:
    """A pytest fixture body: a default context for the test, popped afterwards."""
    cuda.init()
    ctx = make_default_context()
    assert isinstance(ctx.get_device().name(), str)
    yield
    ctx.pop()
    clear_context_caches()
    gc.collect()
