"""Module and Function: loaded device code and its kernels; launching them.

`dev.load_module(x)` takes an ObjectCode from `Program.compile`, CUBIN / PTX /
fatbin bytes, or a path.  `mod.function("name")` finds a kernel -- by the
name expression given to `Program` (`"saxpy<float>"`) or by its symbol.
`fn.launch(grid, block, *args, stream=None, shared_mem=0)` queues it.
"""

from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from . import _core, _driver
from . import dtypes as _dtypes
from ._core import CLOSED
from ._devices import states
from ._driver import call, driver, relaxed_capture, try_call
from .errors import Unsupported, closed, driver_error, invalid
from .images import check_image
from .launch import ArgPacker, build_packer, param_layout_fallback, ptx_param_types
from .memory import adopt
from .program import ObjectCode

if TYPE_CHECKING:
    from .device import Device

__all__ = ["Module", "Function", "FunctionAttributes", "JitLog", "LaunchConfig", "PreparedLaunch",
           "function_param_layout", "load_module", "load_module_file", "load_module_image", "image_kind",
           "loadable_image", "module_function", "module_global", "unload_module"]

LaunchConfig = _core.LaunchConfig
PreparedLaunch = _core.PreparedLaunch

def image_kind(image: bytes) -> str:
    """"cubin", "fatbin", "ptx" or "ltoir", after checking the image against its own headers (InvalidArgument)."""
    return check_image(image, "cuModuleLoadData")


def loadable_image(code: Any, op: str) -> tuple[bytes, dict[str, str], str]:
    """(image the driver can load, name map, kind) from an ObjectCode, bytes or a path; every image is checked."""

    name_map: dict[str, str] = {}
    if isinstance(code, ObjectCode):
        image, name_map = code.code, dict(code.name_map)
    elif isinstance(code, (bytes, bytearray, memoryview)):
        image = bytes(code)
    elif isinstance(code, (str, os.PathLike)):
        path = Path(code)
        if not path.is_file():
            raise invalid(op, f"no such module file: {path}")
        image = path.read_bytes()
    else:
        raise invalid(op, f"expected ObjectCode, bytes or a path, got {type(code).__name__}")
    kind = check_image(image, op)
    if kind == "ltoir":
        raise invalid(op, "LTO-IR cannot be loaded: link it first (ironaccel_cuda.Linker(...).link())")
    if kind == "ptx" and not image.endswith(b"\0"):
        image += b"\0"  # the driver reads PTX as a C string
    return image, name_map, kind


def param_types(code: Any, image: bytes, kind: str) -> dict[str, tuple[str, ...]]:
    """{symbol: PTX parameter types} of the kernels in `code`, where they are known (Program output, PTX)."""

    if isinstance(code, ObjectCode) and code.params:
        return dict(code.params)
    if kind == "ptx":
        return ptx_param_types(image)
    return {}


_settle_lock = threading.Lock()
_settle_pairs: dict[int, tuple[Any, Any]] = {}  # primary context -> its private (stream, event), kept for the process


def settle_lazy_load(ctx: Any) -> None:
    """End the slow state getting a kernel leaves the driver in, without waiting for any of the user's work.

    With lazy loading (CUDA's default), getting a kernel moves its code to the device, and from then on every
    stream query and wait in the process is slower (an idle stream's query several times its usual cost), until
    the driver sees an event of an idle stream complete.  The user's next launch and its sync
    do not end it; cuCtxSynchronize would, but waits for everything (the experiments probe_idle_sync.py
    --first-load and ab_settle.py in ironaccel-cuda/bench/experiments/).  So: an event on a private stream of `ctx`,
    waited for at once, with this thread's capture mode relaxed so that a capture in progress is not
    invalidated.  A primary context keeps its stream and event for the process, as it keeps its default stream
    (making and destroying them for every kernel is slow); another context's are made each time.  It only
    restores speed, so a failure here is ignored.
    """
    d = driver()
    with relaxed_capture(d) as relaxed:
        if not relaxed:
            return  # unrelaxed, the wait could invalidate a capture in progress on this thread
        try:
            pair = _settle_pairs.get(int(ctx))
            if pair is None:
                with _settle_lock:
                    pair = _settle_pairs.get(int(ctx)) or _settle_in(d, ctx)
            if pair is not None and not d.cuEventRecord(pair[1], pair[0])[0]:
                d.cuEventSynchronize(pair[1])
        except RuntimeError:
            pass


def _settle_in(d: Any, ctx: Any) -> tuple[Any, Any] | None:
    """Settle once in `ctx` with a new stream and event; a primary context's pair is kept (None: nothing kept)."""

    if d.cuCtxPushCurrent(ctx)[0]:
        return None
    try:
        err, s = d.cuStreamCreate(1)  # CU_STREAM_NON_BLOCKING
        if err:
            return None
        err, e = d.cuEventCreate(2)  # CU_EVENT_DISABLE_TIMING
        if err:
            d.cuStreamDestroy(s)
            return None
        if any(int(st.ctx) == int(ctx) for st in list(states.values())):
            _settle_pairs[int(ctx)] = (s, e)
            return s, e
        if not d.cuEventRecord(e, s)[0]:
            d.cuEventSynchronize(e)
        d.cuEventDestroy(e)
        d.cuStreamDestroy(s)
        return None
    finally:
        d.cuCtxPopCurrent()
        _core.forget_current()


def load_module(device: Device, code: Any, context: Any = None) -> Module:
    op = "cuModuleLoadData"
    image, name_map, kind = loadable_image(code, op)
    params = param_types(code, image, kind)
    if context is None:
        device._bind_here()
        h = call(op, image)
    else:
        with context._current(op):
            h = call(op, image)
    return Module._make(h, device, name_map, kind, context, params)


class Module:
    """Loaded device code.  `close()` unloads it (idempotent); its Functions and global views are closed too."""

    _h: Any
    device: Device
    kind: str
    name_map: dict[str, str]
    param_types: dict[str, tuple[str, ...]]
    context: Any
    _functions: dict[str, Function]
    _views: dict[tuple[str, str], Any]

    def __init__(self) -> None:
        raise TypeError("load modules with Device.load_module()")

    @classmethod
    def _make(cls, h: Any, device: Device, name_map: dict[str, str], kind: str, context: Any = None,
              params: dict[str, tuple[str, ...]] | None = None) -> Module:
        m = object.__new__(cls)
        m._h = h
        m.device = device
        m.kind = kind
        m.name_map = name_map
        m.param_types = params or {}  # {symbol: PTX parameter types}, where the code says
        m.context = context  # an explicit Context it was loaded into, or None (the primary context)
        m._functions = {}
        m._views = {}
        if context is not None:
            context._adopt(m)
        return m

    def function(self, name: str) -> Function:
        """The kernel `name` (a name expression given to Program, or a symbol)."""
        op = "cuModuleGetFunction"
        if self._h is CLOSED:
            raise closed(op, "module")
        fn = self._functions.get(name) if isinstance(name, str) else None  # an unhashable name must not raise
        if fn is not None:
            return fn
        if not isinstance(name, str) or not name:
            raise invalid(op, f"function name must be a non-empty str, got {name!r}")
        symbol = _symbol(self.name_map, name, op)
        err, h = try_call(op, self._h, symbol)
        if err:
            known = f"; name expressions: {sorted(self.name_map)}" if self.name_map else ""
            raise driver_error(err, op, f"no kernel {name!r} (symbol {symbol.decode()!r}) in this module{known}")
        default = self.context.default_stream if self.context is not None else None
        settle_lazy_load(self.context._ctx if self.context is not None else self.device._state.ctx)
        fn = Function._make(h, self, name, default=default, types=self.param_types.get(symbol.decode()))
        self._functions[name] = fn
        return fn

    def get_global(self, name: str, dtype: Any = "uint8") -> Any:
        """A DeviceBuf over the `__device__` or `__constant__` variable `name` (cuModuleGetGlobal).

        `.ptr` and `.nbytes` are its address and size; `copy_from` / `copy_to_host`
        write and read it from the host.  The view frees nothing and is closed
        with the module.  `dtype` must divide the variable's size.
        """
        op = "cuModuleGetGlobal"
        if self._h is CLOSED:
            raise closed(op, "module")
        if not isinstance(name, str) or not name:
            raise invalid(op, f"the global's name must be a non-empty str, got {name!r}")
        key = (name, str(dtype))
        view = self._views.get(key)
        if view is not None and not view.closed:
            return view
        err, out = try_call(op, self._h, _symbol(self.name_map, name, op))
        if err:
            raise driver_error(err, op, f"no __device__ or __constant__ variable {name!r} in this module")
        view = self._views[key] = global_view(self.device, int(out[0]), int(out[1]), dtype, name, op, self)
        return view

    @property
    def closed(self) -> bool:
        """Whether the module was unloaded (its Functions and global views are closed too)."""
        return self._h is CLOSED

    def close(self) -> None:
        """Unload the module (cuModuleUnload) and close its Functions and global views.  Idempotent."""
        h = self._h
        self._h = CLOSED
        if h is CLOSED:
            return
        close_contents(self)

        if _driver.forked:
            call("cuModuleUnload", h)
        elif self.context is not None:
            if self.context.closed:
                return  # destroying the context unloaded it
            with self.context._current("cuModuleUnload"):
                call("cuModuleUnload", h)
        else:
            self.device._bind_here()
            call("cuModuleUnload", h)

    def __enter__(self) -> Module:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Module {self.kind}{' closed' if self._h is CLOSED else ''} on cuda:{self.device.ordinal}>"


def close_contents(owner: Any) -> None:
    """Close the Functions and global views of a Module or Library (before it unloads its code)."""
    for fn in owner._functions.values():
        fn._h = CLOSED
    owner._functions.clear()
    views, owner._views = owner._views, {}
    for view in views.values():
        view.close()


def _symbol(name_map: dict[str, str], name: str, op: str) -> bytes:
    symbol = name_map.get(name, name)
    if "\0" in symbol:
        raise invalid(op, f"the name {name!r} holds a NUL character")
    try:
        return symbol.encode()
    except UnicodeEncodeError:
        raise invalid(op, f"the name {name!r} is not encodable as UTF-8") from None


def global_view(device: Device, ptr: int, nbytes: int, dtype: Any, name: str, op: str, owner: Any) -> Any:
    """A DeviceBuf (frees nothing) over `nbytes` of a module or library global at `ptr`."""

    _, npdt, _ = _dtypes.spec(dtype, op)
    if nbytes % npdt.itemsize:
        raise invalid(op, f"the global {name!r} is {nbytes} bytes, not a whole number of {npdt.name} elements")
    return adopt(ptr, nbytes // npdt.itemsize, dtype, device, keepalive=owner)


@dataclass(frozen=True)
class FunctionAttributes:
    """What the driver reports about a kernel (cuFuncGetAttribute)."""

    registers: int
    shared_bytes: int  # static shared memory per block
    max_threads_per_block: int
    const_bytes: int
    local_bytes: int
    max_dynamic_shared_bytes: int
    ptx_version: int
    binary_version: int
    num_params: int | None
    shared_carveout: int  # preferred shared-memory carveout, % of the L1/shared split (-1: the driver's choice)
    cache_config: str | None  # the cache preference set through ironaccel ("none", "shared", "l1", "equal"), else None

    def to_dict(self) -> dict[str, Any]:
        """The attributes as a plain dict (JSON-ready, for reports)."""
        return asdict(self)


_FUNC_ATTRS = {
    "registers": "NUM_REGS",
    "shared_bytes": "SHARED_SIZE_BYTES",
    "max_threads_per_block": "MAX_THREADS_PER_BLOCK",
    "const_bytes": "CONST_SIZE_BYTES",
    "local_bytes": "LOCAL_SIZE_BYTES",
    "max_dynamic_shared_bytes": "MAX_DYNAMIC_SHARED_SIZE_BYTES",
    "ptx_version": "PTX_VERSION",
    "binary_version": "BINARY_VERSION",
    "shared_carveout": "PREFERRED_SHARED_MEMORY_CARVEOUT",
}

# Function.set_attributes(cache_config=): the CUfunc_cache values by name (the driver has no getter for them).
_CACHE_CONFIGS = {"none": 0, "shared": 1, "l1": 2, "equal": 3}


def _dim3(value: Any, what: str, op: str = "cuLaunchKernel") -> tuple[int, int, int]:
    if value.__class__ is int:
        if op == "cuLaunchKernel" or 0 < value < 1 << 32:
            return value, 1, 1
        raise invalid(op, f"{what} must be positive and below 2**32, got {value!r}")
    try:
        parts = tuple(value)
    except TypeError:
        raise invalid(op, f"{what} must be an int or a tuple of 1-3 ints, got {value!r}") from None
    if not 1 <= len(parts) <= 3 or any(isinstance(p, bool) or not isinstance(p, int) for p in parts):
        raise invalid(op, f"{what} must be an int or a tuple of 1-3 ints, got {value!r}")
    dims = (*parts, 1, 1)[:3]
    if op != "cuLaunchKernel" and not all(0 < d < 1 << 32 for d in dims):
        raise invalid(op, f"{what} must be positive and below 2**32, got {value!r}")
    return dims  # type: ignore[return-value]


def _positive(value: Any, what: str, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 1 << 31:
        raise invalid(op, f"{what} must be a positive int, got {value!r}")
    return value


def _count(value: Any, what: str, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 31:
        raise invalid(op, f"{what} must be a non-negative int, got {value!r}")
    return value


class Function(_core.FunctionCore):
    """A kernel in a loaded Module.

    `launch(grid, block, *args, stream=None, shared_mem=0)` is the hot method,
    inherited from `_core.FunctionCore`; argument packing is prepared once per
    tuple of argument types (`_prepare`) and reused.
    """

    __slots__ = ("module", "device", "_layout", "_kernel", "_types", "_cache_config")
    module: Any
    device: Device
    _layout: tuple[tuple[int, int], ...] | None | Literal[False]  # False: not queried yet
    _kernel: Any
    _types: tuple[str, ...] | None
    _cache_config: str | None

    def __init__(self) -> None:
        raise TypeError("get functions with Module.function() or Library.function()")

    @classmethod
    def _make(cls, h: Any, module: Any, name: str, *, default: Any = None, kernel: Any = None,
              device: Any = None, types: tuple[str, ...] | None = None) -> Function:
        f = cls.__new__(cls)
        f._h = int(h)
        f.module = module
        f.name = name
        f.device = module.device if device is None else device
        f._ordinal = f.device.ordinal
        st = f.device._state
        f._default = st.default_stream if default is None else default
        f._reachable = st.reachable
        f._layout = False  # not queried yet; None: the driver cannot report it
        f._kernel = kernel  # the CUkernel of a library function (h is the same handle), else None
        f._types = types  # the PTX types of its parameters, when known (packing checks floats against them)
        f._tls = threading.local()
        f._cache_config = None  # no cuFuncSetCacheConfig through ironaccel yet: the context's preference applies
        return f

    # -- attributes ---------------------------------------------------------

    def _attr(self, name: str) -> int:
        attr = getattr(driver().CUfunction_attribute, "CU_FUNC_ATTRIBUTE_" + name)
        if self._kernel is not None:
            return int(call("cuKernelGetAttribute", attr, self._kernel, self.device._state.cudev))
        return int(call("cuFuncGetAttribute", attr, self._h))

    @property
    def attributes(self) -> FunctionAttributes:
        """What the driver reports about this kernel: registers, shared, constant and local memory, limits."""
        op = "cuFuncGetAttribute"
        if self._h is CLOSED:
            raise closed(op, "function")
        values = {key: self._attr(name) for key, name in _FUNC_ATTRS.items()}
        layout = self.param_layout()
        return FunctionAttributes(**values, num_params=None if layout is None else len(layout),
                                  cache_config=getattr(self, "_cache_config", None))

    def param_layout(self) -> tuple[tuple[int, int], ...] | None:
        """[(offset, size)] of each kernel parameter (cuFuncGetParamInfo), or None if the driver can't say."""
        if self._layout is False:
            if self._kernel is not None:
                self._layout = _query_layout(self._kernel, "cuKernelGetParamInfo")
            else:
                self._layout = _query_layout(self._h)
        layout = self._layout
        assert layout is not False
        return layout

    def _check(self, op: str) -> None:
        if self._h is CLOSED:
            raise closed(op, "function")

    def max_active_blocks_per_sm(self, block: int, dynamic_smem: int = 0) -> int:
        """Resident blocks per multiprocessor for `block` threads (cuOccupancyMaxActiveBlocksPerMultiprocessor)."""
        op = "cuOccupancyMaxActiveBlocksPerMultiprocessor"
        self._check(op)
        block = _positive(block, "block", op)
        self.device._bind_here()
        return int(call(op, self._h, block, _count(dynamic_smem, "dynamic_smem", op)))

    def max_potential_block_size(self, dynamic_smem: Any = 0, block_limit: int = 0) -> tuple[int, int]:
        """(minimum grid for full occupancy, block size that maximises it) (cuOccupancyMaxPotentialBlockSize).

        `dynamic_smem` is bytes of dynamic shared memory per block: an int, or a
        callable taking a block size and returning the bytes that block size
        needs.  `block_limit` caps the block size (0: the kernel's own limit).
        """
        op = "cuOccupancyMaxPotentialBlockSize"
        self._check(op)
        limit = _count(block_limit, "block_limit", op)
        self.device._bind_here()
        if not callable(dynamic_smem):
            grid, block = call(op, self._h, None, _count(dynamic_smem, "dynamic_smem", op), limit)
            return int(grid), int(block)
        failures: list[BaseException] = []

        def per_block(size: int) -> int:
            try:
                need = dynamic_smem(int(size))
                if isinstance(need, bool) or not isinstance(need, int) or need < 0:
                    raise invalid(op, f"dynamic_smem({size}) must return a non-negative int, got {need!r}")
                return need
            except BaseException as exc:  # kept and raised below: never lost inside the driver's call
                failures.append(exc)
                return 0

        thunk = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_int)(per_block)
        address = ctypes.cast(thunk, ctypes.c_void_p).value
        grid, block = call(op, self._h, driver().CUoccupancyB2DSize(address), 0, limit)
        if failures:
            raise failures[0]
        return int(grid), int(block)

    def available_dynamic_shared(self, blocks_per_sm: int, block: int) -> int:
        """Bytes of dynamic shared memory a block can have with `blocks_per_sm` blocks of `block` threads per SM."""
        op = "cuOccupancyAvailableDynamicSMemPerBlock"
        self._check(op)
        blocks_per_sm = _positive(blocks_per_sm, "blocks_per_sm", op)
        block = _positive(block, "block", op)
        self.device._bind_here()
        return int(call(op, self._h, blocks_per_sm, block))

    def max_potential_cluster_size(self, grid: Any, block: Any, shared_mem: int = 0) -> int:
        """The largest thread-block cluster this kernel can launch with (cuOccupancyMaxPotentialClusterSize).

        Portable sizes only (8 on compute capability 9.0) unless the kernel
        allows non-portable cluster sizes.
        """
        op = "cuOccupancyMaxPotentialClusterSize"
        self._check(op)
        config = self._cluster_config(op, grid, block, shared_mem, None)
        self.device._bind_here()
        return int(call(op, self._h, config))

    def max_active_clusters(self, grid: Any, block: Any, cluster: Any, shared_mem: int = 0) -> int:
        """How many clusters of `cluster` blocks can be co-resident on the device (cuOccupancyMaxActiveClusters)."""
        op = "cuOccupancyMaxActiveClusters"
        self._check(op)
        config = self._cluster_config(op, grid, block, shared_mem, cluster)
        self.device._bind_here()
        return int(call(op, self._h, config))

    def _cluster_config(self, op: str, grid: Any, block: Any, shared_mem: int, cluster: Any) -> Any:
        drv = driver()
        g, b = _dim3(grid, "grid", op), _dim3(block, "block", op)
        config = drv.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = g
        config.blockDimX, config.blockDimY, config.blockDimZ = b
        config.sharedMemBytes = _count(shared_mem, "shared_mem", op)
        config.hStream = drv.CUstream(int(self._default._h))
        if cluster is not None:
            c = _dim3(cluster, "cluster", op)
            if any(gi % ci for gi, ci in zip(g, c)):
                raise invalid(op, f"the grid {g} is not a whole number of clusters {c}")
            attr = drv.CUlaunchAttribute()
            attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = c
            config.attrs = [attr]
            config.numAttrs = 1
        else:
            config.numAttrs = 0
        return config

    def set_max_dynamic_shared(self, nbytes: int) -> None:
        """Allow up to `nbytes` of dynamic shared memory per block (needed above 48 KiB): `set_attributes`'s
        `max_dynamic_shared`."""
        self.set_attributes(max_dynamic_shared=nbytes)

    def set_attributes(self, *, max_dynamic_shared: int | None = None, shared_carveout: int | None = None,
                       cache_config: str | None = None) -> FunctionAttributes:
        """Set this kernel's settable attributes and return them all as the driver now reports them.

        `max_dynamic_shared`: bytes of dynamic shared memory a launch may ask for (above 48 KiB needs this; at
        most the device's opt-in limit less the kernel's static shared memory).  `shared_carveout`: the preferred
        part of the L1/shared split for shared memory, 0-100 %, or -1 for the driver's choice (a hint).
        `cache_config`: "none", "shared", "l1" or "equal" (cuFuncSetCacheConfig, a hint; the driver cannot be
        asked for it, so `attributes.cache_config` is what was set here).  Values are checked before any call.
        """
        if self._h is CLOSED:
            raise closed("cuFuncSetAttribute", "function")
        attrs = driver().CUfunction_attribute
        todo: list[tuple[Any, int]] = []
        if max_dynamic_shared is not None:
            op = "cuFuncSetAttribute"
            nbytes = _count(max_dynamic_shared, "max_dynamic_shared", op)
            limit = self.device.attributes.max_shared_memory_per_block_optin - self._attr("SHARED_SIZE_BYTES")
            if nbytes > limit:
                raise invalid(op, f"max_dynamic_shared={nbytes} is above what {self.name!r} can have on cuda:"
                                  f"{self.device.ordinal} ({limit} bytes: the opt-in limit less its static shared)")
            todo.append((attrs.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes))
        if shared_carveout is not None:
            carveout = shared_carveout
            if isinstance(carveout, bool) or not isinstance(carveout, int) or not -1 <= carveout <= 100:
                raise invalid("cuFuncSetAttribute", f"shared_carveout must be an int percentage 0-100 or -1 (the "
                                                    f"driver's choice), got {shared_carveout!r}")
            todo.append((attrs.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, shared_carveout))
        if cache_config is not None and cache_config not in _CACHE_CONFIGS:
            raise invalid("cuFuncSetCacheConfig", f"cache_config must be one of {sorted(_CACHE_CONFIGS)}, "
                                                  f"got {cache_config!r}")
        cudev = self.device._state.cudev
        for attr, value in todo:
            if self._kernel is not None:
                call("cuKernelSetAttribute", attr, value, self._kernel, cudev)
            else:
                call("cuFuncSetAttribute", self._h, attr, value)
        if cache_config is not None:
            config = driver().CUfunc_cache(_CACHE_CONFIGS[cache_config])
            if self._kernel is not None:
                call("cuKernelSetCacheConfig", self._kernel, config, cudev)
            else:
                call("cuFuncSetCacheConfig", self._h, config)
            self._cache_config = cache_config
        return self.attributes

    def prepare(self, grid: Any, block: Any, *args: Any, stream: Any = None, shared_mem: int = 0,
                config: LaunchConfig | None = None) -> PreparedLaunch:
        """This launch with its arguments packed once: calling the result queues it again (see PreparedLaunch).

        For repeated launches of one kernel with the same shape: a call costs the driver call and a check
        that the function, the stream and each buffer argument are still open.
        """
        if self._h is CLOSED:
            raise closed("cuLaunchKernel", "function (its module was closed)")
        return _core.prepare_launch(self, grid, block, args, stream, shared_mem, config, self._new_packer(args))

    def _allow_non_portable_clusters(self) -> None:
        """Cold, once per function: let clusters above 8 blocks run (LaunchConfig(non_portable_cluster=True))."""
        attr = driver().CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
        call("cuFuncSetAttribute", self._h, attr, 1)

    @property
    def handle(self) -> int:
        """The CUfunction address, for other libraries that launch it themselves."""
        if self._h is CLOSED:
            raise closed("Function.handle", "function")
        return int(self._h)

    def __repr__(self) -> str:
        return f"<Function {self.name!r} on cuda:{self._ordinal}{' closed' if self._h is CLOSED else ''}>"

    # -- cold paths ---------------------------------------------------------

    def _new_packer(self, args: tuple[Any, ...]) -> ArgPacker:
        """A new packer for `args`, checked against the kernel's parameters (a PreparedLaunch and a graph
        kernel node own theirs; `_prepare` keeps one per thread and argument types)."""
        layout = self.param_layout()
        if layout is None:
            layout = param_layout_fallback(args)
        return build_packer(layout, args, ordinal=self._ordinal, reachable=self._reachable, name=self.name,
                            types=self._types)

    def _prepare(self, args: tuple[Any, ...]) -> ArgPacker:
        if self._h is CLOSED:
            raise closed("cuLaunchKernel", "function (its module was closed)")
        packer = self._new_packer(args)
        try:
            packers = self._tls.packers
        except AttributeError:
            packers = self._tls.packers = {}
        packers[tuple(map(type, args))] = packer
        return packer

    def _bad_stream(self, s: Any) -> Exception:
        if not isinstance(s, _core.StreamCore):
            return invalid("cuLaunchKernel", f"stream must be a Stream, got {type(s).__name__}")
        return invalid("cuLaunchKernel", f"the stream is on cuda:{s._ordinal} but {self.name} is loaded on "
                       f"cuda:{self._ordinal}")

    def _launch_error(self, s: Any, exc: Exception, grid: tuple, block: tuple, smem: Any) -> Exception:
        op = "cuLaunchKernel"
        if self._h is CLOSED:
            return closed(op, "function (its module was closed)")
        if not isinstance(s, _core.StreamCore):
            return invalid(op, f"stream must be a Stream, got {type(s).__name__}")
        if s._h is CLOSED:
            return closed(op, "stream")
        return invalid(op, f"bad launch configuration grid={grid} block={block} shared_mem={smem!r}: {exc}")


def function_param_layout(handle: int | Any, *, strict: bool = False) -> tuple[tuple[int, int], ...] | None:
    """[(offset, size)] of each parameter of any CUfunction, ours or another library's (cuFuncGetParamInfo):
    where a launch puts each argument in the parameter block; () for a kernel without parameters.

    None where the driver cannot say (a driver or binding without the call, or a driver error); `strict=True`
    raises instead: Unsupported for a missing call, the typed error of the driver's.
    """
    op = "cuFuncGetParamInfo"
    if isinstance(handle, bool) or not isinstance(handle, int) and not hasattr(handle, "getPtr"):
        raise invalid(op, f"expected a CUfunction (its address, or the cuda.bindings object), got {handle!r}")
    return _query_layout(handle, op, strict=strict)


def _query_layout(h: Any, op: str = "cuFuncGetParamInfo", *, strict: bool = False
                  ) -> tuple[tuple[int, int], ...] | None:
    """The kernel's parameter layout (() for none), or None when the driver cannot report it (`strict`: raise)."""
    drv = driver()
    if not hasattr(drv, op):
        if strict:
            raise Unsupported("cuda", op, "cuda.bindings has no " + op)
        return None
    layout = []
    index = 0
    while True:
        try:
            err, out = try_call(op, h, index)
        except RuntimeError as exc:  # the driver lacks the entry point
            if strict:
                raise Unsupported("cuda", op, f"the driver does not provide {op}: {exc}") from None
            return None
        if err == 1:  # CUDA_ERROR_INVALID_VALUE: past the last parameter
            break
        if err:
            if strict:
                raise driver_error(err, op)
            return None
        offset, size = out
        layout.append((int(offset), int(size)))
        index += 1
    return tuple(layout)


# -- modules by handle, in the current context ----------------------------------------------------------------------
# For code that keeps contexts of its own (the PyCUDA compat, another library's context): the context current on the
# calling thread loads the code; these take and give CUmodule / CUfunction addresses and own nothing, so the caller
# unloads what it loaded.  `Device.load_module` / `Context.load_module` and `Module` are the owning form.

_LOG_BYTES = 1 << 15  # each of the JIT's info and error logs `load_module_image` collects
_LOG_OPTIONS = ("CU_JIT_INFO_LOG_BUFFER", "CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES", "CU_JIT_ERROR_LOG_BUFFER",
                "CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES")


@dataclass
class JitLog:
    """The driver JIT's info and error logs of one `load_module_image` call, filled whether or not it succeeds."""

    info: str = ""
    error: str = ""


def _module_handle(module: Any, op: str) -> Any:
    if isinstance(module, bool) or not isinstance(module, int) or not 0 < module < 1 << 64:
        raise invalid(op, f"expected a CUmodule address (a positive int below 2**64), got {module!r}")
    return driver().CUmodule(module)


def _jit_option(key: Any, op: str) -> Any:
    """A CUjit_option from its name (with or without the CU_JIT_ prefix, any case), its value or the enum member."""
    options = driver().CUjit_option
    if isinstance(key, options):
        found = key
    elif isinstance(key, str):
        name = key.upper() if key.upper().startswith("CU_JIT_") else "CU_JIT_" + key.upper()
        found = getattr(options, name, None)
    elif isinstance(key, int) and not isinstance(key, bool):
        try:
            found = options(int(key))
        except ValueError:
            found = None
    else:
        found = None
    if found is None or found.name == "CU_JIT_NUM_OPTIONS":
        raise invalid(op, f"no JIT option {key!r} (a CUjit_option name, value or member)")
    if found.name in _LOG_OPTIONS:
        raise invalid(op, f"{found.name} is load_module_image's own: pass log=JitLog() for the logs")
    return found


def load_module_file(path: str | os.PathLike[str]) -> int:
    """The address of a CUmodule loaded from the CUBIN, PTX or fatbin file at `path` into the current context
    (cuModuleLoad; the driver reads the file: its CUDA_ERROR_FILE_NOT_FOUND for none)."""
    op = "cuModuleLoad"
    if not isinstance(path, (str, os.PathLike)):
        raise invalid(op, f"expected a path (str or os.PathLike), got {type(path).__name__}")
    name = os.fsencode(path)
    if b"\0" in name:
        raise invalid(op, f"the path {path!r} holds a NUL character")
    return int(call(op, name))


def load_module_image(image: Any, *, jit_options: Any = (), log: JitLog | None = None) -> int:
    """The address of a CUmodule loaded from CUBIN, PTX or fatbin bytes into the current context.

    cuModuleLoadData, or cuModuleLoadDataEx with `jit_options` ({option: value} or (option, value) pairs; an
    option is a CUjit_option name -- "max_registers", "CU_JIT_TARGET" -- value or member) or `log`: a JitLog
    filled with the JIT's info and error logs, also when the load fails.  PTX without its terminating NUL gets
    one; otherwise the image goes to the driver as given (its error for a bad one: `Device.load_module` checks
    images first).  `unload_module` gives the module back; destroying the context unloads it too.
    """
    op = "cuModuleLoadData" if not jit_options and log is None else "cuModuleLoadDataEx"
    if isinstance(image, str):
        raise invalid(op, "image must be bytes (CUBIN, PTX or fatbin), not str")
    try:
        data = bytes(memoryview(image).cast("B"))
    except (TypeError, ValueError) as exc:
        raise invalid(op, f"image must be a bytes-like object, got {type(image).__name__} ({exc})") from None
    if not data:
        raise invalid(op, "the image is empty")
    if log is not None and not isinstance(log, JitLog):
        raise invalid(op, f"log must be a JitLog or None, got {type(log).__name__}")
    if data[:4] not in (b"\x7fELF", b"\x50\xed\x55\xba") and not data.endswith(b"\0"):
        data += b"\0"  # PTX is read as a C string
    if op == "cuModuleLoadData":
        return int(call(op, data))
    try:
        pairs = list(jit_options.items()) if hasattr(jit_options, "items") else [(k, v) for k, v in jit_options]
    except (TypeError, ValueError):
        raise invalid(op, "jit_options must be a mapping or (option, value) pairs") from None
    keys = [_jit_option(k, op) for k, _ in pairs]
    values: list[Any] = [v for _, v in pairs]
    info = error = None
    if log is not None:
        info, error = bytearray(_LOG_BYTES), bytearray(_LOG_BYTES)  # the driver writes into these
        keys += [getattr(driver().CUjit_option, n) for n in _LOG_OPTIONS]
        values += [info, _LOG_BYTES, error, _LOG_BYTES]
    try:
        return int(call(op, data, len(keys), keys, values))
    except (TypeError, ValueError, OverflowError) as exc:  # a value the binding cannot convert for its option
        raise invalid(op, f"a JIT option's value does not fit it: {type(exc).__name__}: {exc}") from None
    finally:
        if log is not None:
            log.info, log.error = _log_text(info), _log_text(error)


def _log_text(buf: bytearray | None) -> str:
    return bytes(buf or b"").split(b"\0", 1)[0].decode(errors="replace")


def module_function(module: int, name: str) -> int:
    """The address of kernel `name` (its symbol) of the CUmodule at `module` (cuModuleGetFunction); the driver's
    CUDA_ERROR_NOT_FOUND for none.  `Module.function` is the owning form."""
    op = "cuModuleGetFunction"
    h = _module_handle(module, op)
    if not isinstance(name, str) or not name:
        raise invalid(op, f"function name must be a non-empty str, got {name!r}")
    return int(call(op, h, _symbol({}, name, op)))


def module_global(module: int, name: str) -> tuple[int, int]:
    """(device address, size in bytes) of the `__device__` or `__constant__` variable `name` of the CUmodule at
    `module` (cuModuleGetGlobal).  `Module.get_global` is the typed form."""
    op = "cuModuleGetGlobal"
    h = _module_handle(module, op)
    if not isinstance(name, str) or not name:
        raise invalid(op, f"the global's name must be a non-empty str, got {name!r}")
    ptr, size = call(op, h, _symbol({}, name, op))
    return int(ptr), int(size)


def unload_module(module: int) -> None:
    """Unload the CUmodule at `module` (cuModuleUnload), in the context it was loaded into (current or not)."""
    op = "cuModuleUnload"
    call(op, _module_handle(module, op))
