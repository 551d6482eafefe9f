"""Module and Function: loaded device code and its kernels; launching them.

`dev.load_module(x)` takes an ObjectCode from `Program.compile`, CUBIN / PTX /
fatbin bytes, or a path.  `mod.function("name")` finds a kernel -- by the
name expression given to `Program` (`"saxpy<float>"`) or by its symbol.
`fn.launch(grid, block, *args, stream=None, shared_mem=0)` queues it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _core
from ._core import CLOSED
from ._driver import call, driver, try_call
from .errors import closed, invalid
from .launch import ArgPacker, build_packer, param_layout_fallback

if TYPE_CHECKING:
    from .device import Device

__all__ = ["Module", "Function", "FunctionAttributes", "LaunchConfig", "PreparedLaunch", "load_module", "image_kind"]

LaunchConfig = _core.LaunchConfig
PreparedLaunch = _core.PreparedLaunch

_ELF = b"\x7fELF"
_FATBIN = b"\x50\xed\x55\xba"


def image_kind(image: bytes) -> str:
    """"cubin", "fatbin" or "ptx", from the first bytes."""
    if image[:4] == _ELF:
        return "cubin"
    if image[:4] == _FATBIN:
        return "fatbin"
    return "ptx"


def load_module(device: Device, code: Any) -> Module:
    from .program import ObjectCode

    op = "cuModuleLoadData"
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
    if not image:
        raise invalid(op, "the module image is empty")
    kind = image_kind(image)
    if kind == "ptx" and not image.endswith(b"\0"):
        image += b"\0"  # the driver reads PTX as a C string
    device._bind_here()
    h = call(op, image)
    return Module._make(h, device, name_map, kind)


class Module:
    """Loaded device code.  `close()` unloads it (idempotent); its Functions are closed too."""

    def __init__(self) -> None:
        raise TypeError("load modules with Device.load_module()")

    @classmethod
    def _make(cls, h: Any, device: Device, name_map: dict[str, str], kind: str) -> Module:
        m = object.__new__(cls)
        m._h = h
        m.device = device
        m.kind = kind
        m.name_map = name_map
        m._functions: dict[str, Function] = {}
        return m

    def function(self, name: str) -> Function:
        """The kernel `name` (a name expression given to Program, or a symbol)."""
        op = "cuModuleGetFunction"
        if self._h is CLOSED:
            raise closed(op, "module")
        fn = self._functions.get(name)
        if fn is not None:
            return fn
        if not isinstance(name, str) or not name:
            raise invalid(op, f"function name must be a non-empty str, got {name!r}")
        symbol = self.name_map.get(name, name)
        err, h = try_call(op, self._h, symbol.encode())
        if err:
            from .errors import driver_error

            known = f"; name expressions: {sorted(self.name_map)}" if self.name_map else ""
            raise driver_error(err, op, f"no kernel {name!r} (symbol {symbol!r}) in this module{known}")
        fn = Function._make(h, self, name)
        self._functions[name] = fn
        return fn

    @property
    def closed(self) -> bool:
        return self._h is CLOSED

    def close(self) -> None:
        h = self._h
        self._h = CLOSED
        if h is CLOSED:
            return
        for fn in self._functions.values():
            fn._h = CLOSED
        self._functions.clear()
        from . import _driver

        if not _driver.forked:
            self.device._bind_here()
        call("cuModuleUnload", h)

    def __enter__(self) -> Module:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Module {self.kind}{' closed' if self._h is CLOSED else ''} on cuda:{self.device.ordinal}>"


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

    def to_dict(self) -> dict[str, Any]:
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
}


def _dim3(value: Any, what: str) -> tuple[int, int, int]:
    if value.__class__ is int:
        return value, 1, 1
    try:
        parts = tuple(value)
    except TypeError:
        raise invalid("cuLaunchKernel", f"{what} must be an int or a tuple of 1-3 ints, got {value!r}") from None
    if not 1 <= len(parts) <= 3 or any(isinstance(p, bool) or not isinstance(p, int) for p in parts):
        raise invalid("cuLaunchKernel", f"{what} must be an int or a tuple of 1-3 ints, got {value!r}")
    return (*parts, 1, 1)[:3]  # type: ignore[return-value]


class Function(_core.FunctionCore):
    """A kernel in a loaded Module.

    launch(grid, block, *args, stream=None, shared_mem=0) is the hot method,
    inherited from `_core.FunctionCore`; argument packing is prepared once per
    tuple of argument types (`_prepare`) and reused.
    """

    __slots__ = ("module", "device", "_layout")

    def __init__(self) -> None:
        raise TypeError("get functions with Module.function()")

    @classmethod
    def _make(cls, h: Any, module: Module, name: str) -> Function:
        f = cls.__new__(cls)
        f._h = int(h)
        f.module = module
        f.name = name
        f.device = module.device
        f._ordinal = module.device.ordinal
        st = module.device._state
        f._default = st.default_stream
        f._reachable = st.reachable
        f._layout = False  # not queried yet; None: the driver cannot report it
        f._tls = threading.local()
        return f

    # -- attributes ---------------------------------------------------------

    @property
    def attributes(self) -> FunctionAttributes:
        op = "cuFuncGetAttribute"
        if self._h is CLOSED:
            raise closed(op, "function")
        enum = driver().CUfunction_attribute
        values = {key: int(call(op, getattr(enum, "CU_FUNC_ATTRIBUTE_" + name), self._h))
                  for key, name in _FUNC_ATTRS.items()}
        layout = self.param_layout()
        return FunctionAttributes(**values, num_params=None if layout is None else len(layout))

    def param_layout(self) -> tuple[tuple[int, int], ...] | None:
        """[(offset, size)] of each kernel parameter (cuFuncGetParamInfo), or None if the driver can't say."""
        if self._layout is False:
            self._layout = _query_layout(self._h)
        return self._layout

    def max_active_blocks_per_sm(self, block: int, dynamic_smem: int = 0) -> int:
        """Resident blocks per multiprocessor for `block` threads (cuOccupancyMaxActiveBlocksPerMultiprocessor)."""
        op = "cuOccupancyMaxActiveBlocksPerMultiprocessor"
        if self._h is CLOSED:
            raise closed(op, "function")
        if isinstance(block, bool) or not isinstance(block, int) or block <= 0:
            raise invalid(op, f"block must be a positive int, got {block!r}")
        return int(call(op, self._h, block, dynamic_smem))

    def set_max_dynamic_shared(self, nbytes: int) -> None:
        """Allow up to `nbytes` of dynamic shared memory per block (needed above 48 KiB)."""
        op = "cuFuncSetAttribute"
        if self._h is CLOSED:
            raise closed(op, "function")
        attr = driver().CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        call(op, self._h, attr, int(nbytes))

    def prepare(self, grid: Any, block: Any, *args: Any, stream: Any = None, shared_mem: int = 0,
                config: LaunchConfig | None = None) -> PreparedLaunch:
        """This launch with its arguments packed once: calling the result queues it again (see PreparedLaunch).

        For repeated launches of one kernel with the same shape: a call costs the driver call and a check
        that the function, the stream and each buffer argument are still open.
        """
        if self._h is CLOSED:
            raise closed("cuLaunchKernel", "function (its module was closed)")
        layout = self.param_layout()
        if layout is None:
            layout = param_layout_fallback(args)
        packer = build_packer(layout, args, ordinal=self._ordinal, reachable=self._reachable, name=self.name)
        return _core.prepare_launch(self, grid, block, args, stream, shared_mem, config, packer)

    def _allow_non_portable_clusters(self) -> None:
        """Cold, once per function: let clusters above 8 blocks run (LaunchConfig(non_portable_cluster=True))."""
        attr = driver().CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
        call("cuFuncSetAttribute", self._h, attr, 1)

    @property
    def handle(self) -> int:
        if self._h is CLOSED:
            raise closed("Function.handle", "function")
        return int(self._h)

    def __repr__(self) -> str:
        return f"<Function {self.name!r} on cuda:{self._ordinal}{' closed' if self._h is CLOSED else ''}>"

    # -- cold paths ---------------------------------------------------------

    def _prepare(self, args: tuple[Any, ...]) -> ArgPacker:
        if self._h is CLOSED:
            raise closed("cuLaunchKernel", "function (its module was closed)")
        layout = self.param_layout()
        if layout is None:
            layout = param_layout_fallback(args)
        packer = build_packer(layout, args, ordinal=self._ordinal, reachable=self._reachable, name=self.name)
        try:
            packers = self._tls.packers
        except AttributeError:
            packers = self._tls.packers = {}
        packers[tuple(map(type, args))] = packer
        return packer

    def _bad_stream(self, s: Any) -> Exception:
        from .stream import Stream

        if not isinstance(s, Stream):
            return invalid("cuLaunchKernel", f"stream must be a Stream, got {type(s).__name__}")
        return invalid("cuLaunchKernel", f"the stream is on cuda:{s._ordinal} but {self.name} is loaded on "
                       f"cuda:{self._ordinal}")

    def _launch_error(self, s: Any, exc: Exception, grid: tuple, block: tuple, smem: Any) -> Exception:
        from .stream import Stream

        op = "cuLaunchKernel"
        if self._h is CLOSED:
            return closed(op, "function (its module was closed)")
        if not isinstance(s, Stream):
            return invalid(op, f"stream must be a Stream, got {type(s).__name__}")
        if s._h is CLOSED:
            return closed(op, "stream")
        return invalid(op, f"bad launch configuration grid={grid} block={block} shared_mem={smem!r}: {exc}")


def _query_layout(h: Any) -> tuple[tuple[int, int], ...] | None:
    """The kernel's parameter layout (() for none), or None when the driver cannot report it."""
    drv = driver()
    if not hasattr(drv, "cuFuncGetParamInfo"):
        return None
    layout = []
    index = 0
    while True:
        try:
            err, out = try_call("cuFuncGetParamInfo", h, index)
        except RuntimeError:  # the driver lacks the entry point
            return None
        if err == 1:  # CUDA_ERROR_INVALID_VALUE: past the last parameter
            break
        if err:
            return None
        offset, size = out
        layout.append((int(offset), int(size)))
        index += 1
    return tuple(layout)
