"""cuda.core's `ObjectCode` and `Kernel` over ironaccel's `Module` and `Function`.

An ObjectCode holds the code (bytes, or a file path) and loads it lazily, once, as
cuda.core does: with the context-independent library API, through ironaccel's `Library`
(cuLibraryLoadData).  `ObjectCode.handle` is that `CUlibrary` (cuLibraryUnload takes it),
`get_module()` its `CUmodule` in the current context (cuLibraryGetModule), and
`Kernel.handle` the kernel's `CUkernel` (cuLibraryGetKernel; cuKernelSetAttribute and
cuKernelSetCacheConfig take it).  A Kernel launches through ironaccel's `Function` of that
CUkernel, which the driver takes where a CUfunction goes (cuLaunchKernel, the occupancy
queries): the launch path is the one module kernels use.  `Kernel.from_handle` also accepts
a foreign `CUkernel` (resolved in the current context).

A library is unloaded when its ObjectCode goes, unless its `handle` (or `get_module()`) was handed out:
cuda.core 1.2 never unloads libraries and its clients unload them themselves (numba-cuda does, with
cuLibraryUnload), so from then on the unloading is the handle holder's alone.
"""

from __future__ import annotations

import ctypes
import os
import warnings
import weakref
from collections import namedtuple
from typing import Any

from ironaccel_cuda.library import kernel_function

from . import _ia
from ._utils.cuda_utils import CUDAError, call, driver, from_ironaccel, guarded

__all__ = ["Kernel", "ObjectCode"]

_new = object.__new__
_LOADABLE = ("cubin", "ptx", "fatbin")
_KINDS = ("cubin", "ptx", "ltoir", "fatbin", "object", "library")
ParamInfo = namedtuple("ParamInfo", ("offset", "size"))
MaxPotentialBlockSizeOccupancyResult = namedtuple("MaxPotentialBlockSizeOccupancyResult",
                                                  ("min_grid_size", "max_block_size"))

_functions: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()  # CUkernel -> ironaccel Function
_owners: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()  # CUkernel -> its ObjectCode


def _current_arch() -> str:
    """The current device's compute capability digits ("90"): the target of PTX the driver cannot JIT."""
    from ._device import Device

    return str(Device().arch)


class ObjectCode:
    """Compiled device code of one kind ("cubin", "ptx", "fatbin", "ltoir", "object", "library")."""

    __slots__ = ("_code", "_code_type", "_name", "_sym_map", "_lib", "__weakref__")
    _code: bytes | str
    _code_type: str
    _name: str
    _sym_map: dict[str, str]
    _lib: Any  # the ironaccel Library, once loaded

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("ObjectCode objects cannot be instantiated directly. Please use ObjectCode APIs "
                           "(from_cubin, from_ptx) or Program APIs (compile).")

    @classmethod
    def _init(cls, module: Any, code_type: str, *, name: str = "", symbol_mapping: dict[str, str] | None = None
              ) -> ObjectCode:
        if code_type not in _KINDS:
            raise ValueError(f"unsupported code type: {code_type!r}")
        if isinstance(module, os.PathLike):
            module = os.fspath(module)
        elif isinstance(module, (bytearray, memoryview)):
            module = bytes(module)
        if not isinstance(module, (bytes, str)):
            raise TypeError(f"module must be bytes or a path (str or os.PathLike), got {type(module).__name__}")
        self = _new(cls)
        self._code = module
        self._code_type = code_type
        self._name = name
        self._sym_map = {str(k): v.decode() if isinstance(v, (bytes, bytearray)) else str(v)
                         for k, v in (symbol_mapping or {}).items()}
        self._lib = None
        return self

    @staticmethod
    def _reduce_helper(module: Any, code_type: str, name: str, symbol_mapping: dict[str, str]) -> ObjectCode:
        return ObjectCode._init(module, code_type, name=name, symbol_mapping=symbol_mapping)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ObjectCode._reduce_helper, (self._code, self._code_type, self._name, self._sym_map))

    @staticmethod
    def from_cubin(module: Any, *, name: str = "", symbol_mapping: dict[str, str] | None = None) -> ObjectCode:
        return ObjectCode._init(module, "cubin", name=name, symbol_mapping=symbol_mapping)

    @staticmethod
    def from_ptx(module: Any, *, name: str = "", symbol_mapping: dict[str, str] | None = None) -> ObjectCode:
        return ObjectCode._init(module, "ptx", name=name, symbol_mapping=symbol_mapping)

    @staticmethod
    def from_ltoir(module: Any, *, name: str = "", symbol_mapping: dict[str, str] | None = None) -> ObjectCode:
        return ObjectCode._init(module, "ltoir", name=name, symbol_mapping=symbol_mapping)

    @staticmethod
    def from_fatbin(module: Any, *, name: str = "", symbol_mapping: dict[str, str] | None = None) -> ObjectCode:
        return ObjectCode._init(module, "fatbin", name=name, symbol_mapping=symbol_mapping)

    @staticmethod
    def from_object(module: Any, *, name: str = "", symbol_mapping: dict[str, str] | None = None) -> ObjectCode:
        return ObjectCode._init(module, "object", name=name, symbol_mapping=symbol_mapping)

    @staticmethod
    def from_library(module: Any, *, name: str = "", symbol_mapping: dict[str, str] | None = None) -> ObjectCode:
        return ObjectCode._init(module, "library", name=name, symbol_mapping=symbol_mapping)

    # -- loading ----------------------------------------------------------------

    def _library(self) -> Any:
        """The ironaccel Library of this code (cuLibraryLoadData), loaded on first use; no context needed."""
        lib = self._lib
        if lib is None:
            if self._code_type not in _LOADABLE:
                raise RuntimeError(f'Unsupported code type "{self._code_type}" ({", ".join(_LOADABLE)} can be '
                                   "loaded)")
            try:
                lib = self._load()
            except _ia.DriverError as exc:
                raise from_ironaccel(exc) from None
            self._lib = lib
        return lib

    def _load(self) -> Any:
        """Load the library; PTX newer than the driver's JIT is compiled by nvJitLink for the current device."""
        try:
            return _ia.IaLibrary(self._code)
        except _ia.DriverError as exc:
            if self._code_type != "ptx" or exc.code_name != "CUDA_ERROR_UNSUPPORTED_PTX_VERSION":
                raise
        from ironaccel_cuda.linker import Linker as IaLinker

        return _ia.IaLibrary(IaLinker(self._code).link("cubin", arch=f"sm_{_current_arch()}"))

    def _function(self, name: str, ordinal: int | None = None) -> Any:
        """The ironaccel Function of kernel `name` (its CUkernel) on device `ordinal` (default: the current one)."""
        from ._device import Device

        lib = self._library()
        dev = Device(ordinal)
        symbol = self._sym_map.get(name, name)
        try:
            fn = lib.function(symbol, dev)
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        addr = fn.handle
        _functions[addr] = fn
        _owners[addr] = self
        return fn

    def get_kernel(self, name: str | bytes) -> Kernel:
        """The kernel `name` (a name expression given at compile time, or a symbol)."""
        if isinstance(name, (bytes, bytearray)):
            name = bytes(name).decode()
        return Kernel._from_function(self._function(name), self, name)

    def get_module(self) -> Any:
        """The library's `CUmodule` in the current device's context (cuLibraryGetModule), for legacy APIs."""
        from ._device import Device

        lib = self._library()
        lib.disown()  # the module lives as long as the library: its holder may unload the library, as handle's
        dev = Device()
        before = _ia.current_context()
        _ia.bind(dev._state.ctx)
        try:
            return driver.CUmodule(guarded(lib.module_handle, dev))
        finally:
            if before != int(dev._state.ctx):
                _ia.bind_address(before)

    # -- properties ---------------------------------------------------------------

    @property
    def code(self) -> Any:
        return self._code

    @property
    def name(self) -> str:
        return self._name

    @property
    def code_type(self) -> str:
        return self._code_type

    @property
    def symbol_mapping(self) -> dict[str, bytes]:
        """Name expression -> lowered (mangled) name, as bytes (NVRTC's nvrtcGetLoweredName, as in cuda.core)."""
        return {k: v.encode() for k, v in self._sym_map.items()}

    @property
    def handle(self) -> Any:
        """The context-independent `CUlibrary` (loading the code if needed), as cuda.core's.

        cuda.core 1.2 never unloads a library, so a client holding the handle may unload it itself (numba-cuda
        calls cuLibraryUnload when it drops a module): once the handle is out, the compat leaves the library's
        unloading to that holder (ironaccel's `Library.disown`) and never unloads it a second time.
        """
        return driver.CUlibrary(self._library().disown())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ObjectCode):
            return NotImplemented
        return self is other or (self._code_type == other._code_type and self._code == other._code)

    def __hash__(self) -> int:
        return hash((self._code_type, self._code))

    def __repr__(self) -> str:
        """cuda.core's form; the handle is the CUlibrary's (0 until the code is loaded)."""
        lib = self._lib
        handle = int(lib._h) if lib is not None and lib._h is not None else 0
        return f"<ObjectCode handle={handle:#x} code_type={self._code_type!r}>"


_FUNC_ATTRS = {
    "max_threads_per_block": ("MAX_THREADS_PER_BLOCK", int),
    "shared_size_bytes": ("SHARED_SIZE_BYTES", int),
    "const_size_bytes": ("CONST_SIZE_BYTES", int),
    "local_size_bytes": ("LOCAL_SIZE_BYTES", int),
    "num_regs": ("NUM_REGS", int),
    "ptx_version": ("PTX_VERSION", int),
    "binary_version": ("BINARY_VERSION", int),
    "cache_mode_ca": ("CACHE_MODE_CA", bool),
    "max_dynamic_shared_size_bytes": ("MAX_DYNAMIC_SHARED_SIZE_BYTES", int),
    "preferred_shared_memory_carveout": ("PREFERRED_SHARED_MEMORY_CARVEOUT", int),
    "cluster_size_must_be_set": ("CLUSTER_SIZE_MUST_BE_SET", bool),
    "required_cluster_width": ("REQUIRED_CLUSTER_WIDTH", int),
    "required_cluster_height": ("REQUIRED_CLUSTER_HEIGHT", int),
    "required_cluster_depth": ("REQUIRED_CLUSTER_DEPTH", int),
    "non_portable_cluster_size_allowed": ("NON_PORTABLE_CLUSTER_SIZE_ALLOWED", bool),
    "cluster_scheduling_policy_preference": ("CLUSTER_SCHEDULING_POLICY_PREFERENCE", int),
}


def _func_attribute(name: str, enum_suffix: str, kind: type) -> property:
    def get(self: KernelAttributes) -> Any:
        try:
            return kind(self._function()._attr(enum_suffix))
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None

    get.__name__ = name
    return property(get, doc=f"CU_FUNC_ATTRIBUTE_{enum_suffix} ({kind.__name__}).")


class KernelAttributes:
    """A kernel's CU_FUNC_ATTRIBUTE_* values on one device (`attributes[device]` for another)."""

    __slots__ = ("_kernel", "_ordinal")
    _kernel: Kernel
    _ordinal: int | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("KernelAttributes cannot be instantiated directly. Please use Kernel APIs.")

    @classmethod
    def _init(cls, kernel: Kernel, ordinal: int | None) -> KernelAttributes:
        self = _new(cls)
        self._kernel = kernel
        self._ordinal = ordinal
        return self

    def _function(self) -> Any:
        k = self._kernel
        if self._ordinal is None or self._ordinal == k._fn._ordinal:
            return k._fn
        return k._on_device(self._ordinal)

    def __getitem__(self, device: Any) -> KernelAttributes:
        from ._device import Device

        return KernelAttributes._init(self._kernel, Device(device).ordinal)


for _name, (_suffix, _kind) in _FUNC_ATTRS.items():
    setattr(KernelAttributes, _name, _func_attribute(_name, _suffix, _kind))
del _name, _suffix, _kind


class KernelOccupancy:
    """Occupancy queries of a kernel, on ironaccel's `Function` occupancy methods."""

    __slots__ = ("_kernel",)
    _kernel: Kernel

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("KernelOccupancy cannot be instantiated directly. Please use Kernel APIs.")

    @classmethod
    def _init(cls, kernel: Kernel) -> KernelOccupancy:
        self = _new(cls)
        self._kernel = kernel
        return self

    def max_active_blocks_per_multiprocessor(self, block_size: int, dynamic_shared_memory_size: int) -> int:
        """Resident blocks per multiprocessor (ironaccel's `Function.max_active_blocks_per_sm`)."""
        try:
            return int(self._kernel._fn.max_active_blocks_per_sm(block_size, dynamic_shared_memory_size))
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None

    def max_potential_block_size(self, dynamic_shared_memory_needed: Any, block_size_limit: int
                                 ) -> MaxPotentialBlockSizeOccupancyResult:
        """(min_grid_size, max_block_size) for full occupancy (cuOccupancyMaxPotentialBlockSize).

        `dynamic_shared_memory_needed` is bytes per block (an int) or a `driver.CUoccupancyB2DSize` made as
        cuda.core takes it, `CUoccupancyB2DSize(_ptr=address of a C function of the block size)`.
        """
        fn = self._kernel._fn
        if isinstance(dynamic_shared_memory_needed, driver.CUoccupancyB2DSize):
            # The C function (size_t (*)(int)) at that address, called through ironaccel's per-block callback.
            per_block = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_int)(int(dynamic_shared_memory_needed.getPtr()))
            limit = block_size_limit.__index__() if hasattr(block_size_limit, "__index__") else block_size_limit
            try:
                grid, block = fn.max_potential_block_size(lambda size: int(per_block(size)), limit)
            except _ia.DriverError as exc:
                raise from_ironaccel(exc) from None
            return MaxPotentialBlockSizeOccupancyResult(grid, block)
        if isinstance(dynamic_shared_memory_needed, bool) or not isinstance(dynamic_shared_memory_needed, int):
            raise TypeError("dynamic_shared_memory_needed expected to have type int, or CUoccupancyB2DSize, got "
                            f"{type(dynamic_shared_memory_needed).__name__}")
        try:
            grid, block = fn.max_potential_block_size(dynamic_shared_memory_needed, block_size_limit)
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        return MaxPotentialBlockSizeOccupancyResult(grid, block)

    def available_dynamic_shared_memory_per_block(self, num_blocks_per_multiprocessor: int, block_size: int) -> int:
        """Dynamic shared memory a block can have at this occupancy (cuOccupancyAvailableDynamicSMemPerBlock)."""
        try:
            return int(self._kernel._fn.available_dynamic_shared(num_blocks_per_multiprocessor, block_size))
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None

    def _config(self, config: Any, stream: Any) -> tuple[Any, tuple[int, ...], tuple[int, ...], Any]:
        from ._launch_config import LaunchConfig
        from ._stream import Stream_accept

        if not isinstance(config, LaunchConfig):
            raise TypeError(f"config must be a LaunchConfig, got {type(config).__name__}")
        if not isinstance(stream, _ia.IaStream):
            stream = Stream_accept(stream, allow_stream_protocol=True)
        fn, _ = self._kernel._for_stream(stream)
        cluster = config.cluster
        grid = config.grid if cluster is None else tuple(g * c for g, c in zip(config.grid, cluster))
        return fn, grid, config.block, cluster

    def max_potential_cluster_size(self, config: Any, *, stream: Any) -> int:
        """The largest cluster this kernel can launch with under `config` (cuOccupancyMaxPotentialClusterSize)."""
        fn, grid, block, _ = self._config(config, stream)
        try:
            return int(fn.max_potential_cluster_size(grid, block, config.shmem_size))
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None

    def max_active_clusters(self, config: Any, *, stream: Any) -> int:
        """How many clusters of `config` can be co-resident (cuOccupancyMaxActiveClusters)."""
        fn, grid, block, cluster = self._config(config, stream)
        try:
            return int(fn.max_active_clusters(grid, block, cluster, config.shmem_size))
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None


class Kernel:
    """A kernel: an ironaccel `Function` on the device it was taken on (loaded on others when used there)."""

    __slots__ = ("_fn", "_code", "_name", "_others", "__weakref__")
    _fn: Any
    _code: ObjectCode | None
    _name: str
    _others: dict[int, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Kernel objects cannot be instantiated directly. Please use ObjectCode APIs.")

    @classmethod
    def _from_function(cls, fn: Any, code: ObjectCode | None, name: str) -> Kernel:
        self = _new(cls)
        self._fn = fn
        self._code = code
        self._name = name
        self._others = {}
        return self

    def _on_device(self, ordinal: int) -> Any:
        """This kernel's Function on device `ordinal` (its code loaded there once)."""
        fn = self._others.get(ordinal)
        if fn is None:
            if self._code is None:
                raise CUDAError(f"kernel {self._name!r} has no ObjectCode to load on device {ordinal}")
            fn = self._others[ordinal] = self._code._function(self._name, ordinal)
        return fn

    def _for_stream(self, stream: Any) -> tuple[Any, Any]:
        """(Function, stream) for a launch on `stream` (the default streams take the kernel's own device)."""
        from ._stream import for_device

        if stream._ordinal == -1:
            return self._fn, for_device(stream, self._fn._ordinal)
        return self._on_device(stream._ordinal), stream

    @property
    def attributes(self) -> KernelAttributes:
        return KernelAttributes._init(self, None)

    def _layout(self) -> list[ParamInfo]:
        """The kernel's parameters as ironaccel's launch packs them (`Function.param_layout`, queried once)."""
        layout = self._fn.param_layout()
        if layout is None:  # the driver could not say: a driver error is raised as such, else the call is missing
            from ironaccel_cuda.module import function_param_layout

            try:
                function_param_layout(self._fn._h, strict=True)
            except _ia.Unsupported:
                pass
            except _ia.DriverError as exc:
                raise from_ironaccel(exc) from None
            raise NotImplementedError("cuFuncGetParamInfo needs cuda.bindings and a driver of CUDA 12.4 or newer")
        return [ParamInfo(offset, size) for offset, size in layout]

    @property
    def num_arguments(self) -> int:
        if not _ia.current_context():
            raise CUDAError("CUDA_ERROR_INVALID_CONTEXT: no CUDA context is current")
        return len(self._layout())

    @property
    def arguments_info(self) -> list[ParamInfo]:
        return self._layout()

    @property
    def occupancy(self) -> KernelOccupancy:
        return KernelOccupancy._init(self)

    @property
    def handle(self) -> Any:
        """The kernel's `CUkernel` (cuLibraryGetKernel, or the one from_handle was given), as cuda.core's."""
        fn = self._fn
        fn.handle  # noqa: B018  (a closed Function raises here)
        return driver.CUkernel(int(fn._kernel))

    @property
    def _handle(self) -> Any:
        return self.handle

    @staticmethod
    def from_handle(handle: Any, mod: ObjectCode | None = None) -> Kernel:
        """A Kernel over a CUfunction this compat made, or a foreign CUkernel (resolved in the current context)."""
        from ._device import Device

        if isinstance(handle, bool) or not isinstance(handle, int):
            raise TypeError(f"handle must be an int, got {type(handle).__name__}")
        if not 0 <= handle < 1 << 64:
            raise OverflowError(f"Kernel.from_handle: {handle} is not a kernel handle (an unsigned 64-bit int)")
        if mod is not None and not isinstance(mod, ObjectCode):
            raise TypeError(f"mod must be an ObjectCode or None, got {type(mod).__name__}")
        fn = _functions.get(handle)
        if fn is not None:
            owner = _owners.get(handle)
            if mod is not None and owner is not None and owner is not mod:
                warnings.warn("The kernel's library does not match the ObjectCode passed as mod", stacklevel=2)
            return Kernel._from_function(fn, owner if owner is not None else mod, fn.name)
        dev = Device()
        _ia.ensure(dev._state.ctx)
        func = driver.CUfunction(guarded(kernel_function, handle))
        _ia.settle_lazy_load(dev._state.ctx)
        module = _ia.IaModule._make(_ia.CLOSED, dev, {}, "foreign")
        fn = _ia.IaFunction._make(func, module, f"kernel@{handle:#x}", kernel=driver.CUkernel(handle))
        return Kernel._from_function(fn, mod, fn.name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Kernel):
            return NotImplemented
        return self._fn.handle == other._fn.handle

    def __hash__(self) -> int:
        return hash(self._fn.handle)

    def __repr__(self) -> str:
        return f"<Kernel handle={self._fn.handle:#x}>"
