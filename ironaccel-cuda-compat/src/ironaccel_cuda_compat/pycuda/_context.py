"""Devices and PyCUDA's context stack, over ironaccel_cuda's contexts by handle.

PyCUDA keeps its own per-thread stack of contexts (`make_context` pushes a
new context, `Context.push/pop` move along it, `detach` destroys); its top is
"the current context" for every call that needs one.  This module keeps the
same stack.  The driver's own stack is kept one deep, as PyCUDA keeps it,
and switched with ironaccel's `_core.bind`, so ironaccel's record of the
thread's context stays right.  Because ironaccel objects make the primary
context current when they need it, every call here that depends on the
current context first `ensure`s the top of this stack (a compare in the
compiled core; `_current(routine)`), and code that called into ironaccel
objects binds the top again before returning.

Contexts keep PyCUDA's semantics: `Device.make_context(flags)` creates (and
pushes) a context; `retain_primary_context()` retains the primary one,
unpushed; `detach()` releases (created contexts: destroy_context; attached:
detach_context; primary: release_primary_context) and is also what garbage collection
does; objects made in a context (memory, streams, events, modules) keep it
alive and are released in it.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

from cuda.bindings import driver as _cb

import ironaccel_cuda as cu
from ironaccel import errors as ia
from ironaccel_cuda import _driver as _drv

from . import _fast
from ._enums import compute_mode, device_attribute
from ._errors import LogicError, bad_input, bad_type, from_code, translate

__all__ = ["init", "get_version", "get_driver_version", "Device", "Context", "current_context", "call"]

INVALID_CONTEXT = 201
_CREATED, _PRIMARY, _ATTACHED = "created", "primary", "attached"

# mem_alloc takes memory from the device's stream-ordered pool, unless this says "sync" (read at import).
ALLOC_ENV = "IRONACCEL_CUDA_PYCUDA_ALLOC"
SYNC_ALLOC = os.environ.get(ALLOC_ENV, "").strip().lower() == "sync"


def call(op: str, *args: Any) -> Any:
    """Driver call `op` through cuda.bindings (cold); failures raise PyCUDA's error naming `op`."""
    try:
        return _drv.call(op, *args)
    except ia.IronAccelError as exc:
        raise translate(exc, op) from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise bad_input(op, exc) from None


def guarded(routine: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` (a public ironaccel_cuda call); failures raise PyCUDA's error naming `routine`, as
    `call`'s do."""
    try:
        return fn(*args, **kwargs)
    except ia.IronAccelError as exc:
        raise translate(exc, routine) from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise bad_input(routine, exc) from None


def init(flags: int = 0) -> None:
    """cuInit.  (Every call here initialises CUDA on first use; PyCUDA requires init() first.)"""
    guarded("cuInit", cu.init_driver)
    flags = _uint(flags, "cuInit")
    if flags:  # the driver defines no flags: cuInit answers CUDA_ERROR_INVALID_VALUE
        raise from_code(1, "cuInit")


def get_version() -> tuple[int, int, int]:
    """The CUDA version of the driver API this surface is built on (cuda.bindings' CUDA_VERSION)."""
    v = int(getattr(_cb, "CUDA_VERSION", 0)) or get_driver_version()
    return v // 1000, (v % 1000) // 10, v % 10


def get_driver_version() -> int:
    """cuDriverGetVersion: e.g. 13000 for CUDA 13.0."""
    return int(guarded("cuDriverGetVersion", cu.driver_version))


# -- the context stack ----------------------------------------------------------------


class _Local(threading.local):
    def __init__(self) -> None:
        self.stack: list[Context] = []


_local = _Local()


def current_context(except_: Context | None = None) -> Context | None:
    """The top valid context of this thread's stack (popping detached ones off the top), or None."""
    stack = _local.stack
    while stack:
        top = stack[-1]
        if top._valid and top is not except_:
            return top
        stack.pop()
    return None


def _current(routine: str) -> Context:
    """The current context, made current in the driver too; LogicError naming `routine` if there is none."""
    stack = _local.stack
    if stack:
        top = stack[-1]
        if top._valid:
            _fast.ensure(top.handle)
            return top
    found = current_context()
    if found is None:
        raise from_code(INVALID_CONTEXT, routine, "no currently active context?")
    _fast.ensure(found.handle)
    return found


def _bind_top() -> None:
    """Make the driver's current context this thread's stack top (or none), refreshing ironaccel's record."""
    top = current_context()
    try:
        _fast.bind(top.handle if top is not None else _fast.NO_CONTEXT)
    except ia.IronAccelError as exc:
        raise translate(exc, "cuCtxSetCurrent") from None


def run_in(ctx: Context, fn: Callable[[], Any]) -> bool:
    """Run `fn` with `ctx` current (PyCUDA's scoped activation), then restore what was current.

    False (and `fn` not run) if `ctx` was detached: what it owned went with it.
    """
    if not ctx._valid:
        return False
    stack = _local.stack
    if stack and stack[-1] is ctx:
        _fast.ensure(ctx.handle)
        fn()
        return True
    try:
        previous = cu.current_context_handle()
    except ia.IronAccelError:
        previous = _fast.NO_CONTEXT
    _fast.bind(ctx.handle)
    try:
        fn()
    finally:
        top = current_context()
        if top is not None:
            _fast.bind(top.handle)
        else:
            _fast.bind(previous)
    return True


def cleanup(what: str, ctx: Context, fn: Callable[[], Any]) -> None:
    """Release something `ctx` owns (from __del__ or free): failures warn, as PyCUDA's clean-up does."""
    try:
        run_in(ctx, fn)
    except Exception as exc:
        warnings.warn(f"PyCUDA compat: a clean-up operation failed ({what}): {exc}", stacklevel=3)


def enum_value(kind: str, value: Any, routine: str) -> Any:
    """`value` (a PyCUDA enum member or an int) as cuda.bindings' enum `kind`; LogicError if it is not one."""
    try:
        return getattr(_cb, kind)(value.__index__())
    except (AttributeError, TypeError, ValueError):
        raise from_code(1, routine, f"{value!r} is not a {kind} value") from None


def address(value: Any, routine: str) -> int:
    """A device or host address from an int-like (DeviceAllocation, int, numpy integer, PointerHolderBase)."""
    try:
        return int(value.__index__())
    except (AttributeError, TypeError):
        raise bad_type(routine, f"expected an address (an int or an allocation), not {type(value).__name__}") from None


def _uint(flags: Any, routine: str) -> int:
    """Flags for a driver call taking an unsigned int: PyCUDA's TypeError for a non-int, its OverflowError (the
    binding's conversion) outside 0 .. 2**32 - 1."""
    flags = _flags(flags, routine)
    if not 0 <= flags < 1 << 32:
        raise bad_input(routine, OverflowError(f"flags {flags} do not fit an unsigned int"))
    return flags


_SCHED = {0: "auto", 1: "spin", 2: "yield", 4: "blocking_sync"}  # CU_CTX_SCHED_*
_CTX_FLAGS_MASK = 0xFF  # CU_CTX_FLAGS_MASK: the sched bits, MAP_HOST, LMEM_RESIZE_TO_MAX, the coredump bits, SYNC_MEMOPS


def _flags(flags: Any, routine: str, what: str = "flags") -> int:
    """An int argument (flags, a limit's value, ...) from an int-like; PyCUDA's TypeError for anything else."""
    if isinstance(flags, bool) or not hasattr(flags, "__index__"):
        raise bad_type(routine, f"{what} must be an int, not {flags!r}")
    return flags.__index__()  # type: ignore[no-any-return]


# -- devices ----------------------------------------------------------------------


_capabilities: dict[int, tuple[int, int]] = {}


def _attribute(cudev: Any, name: str) -> int:
    attr = getattr(_cb.CUdevice_attribute, "CU_DEVICE_ATTRIBUTE_" + name)
    return int(guarded("cuDeviceGetAttribute", cu.device_attribute, int(cudev), attr))


class Device:
    """pycuda.driver.Device: a CUDA device by ordinal (or PCI bus id string)."""

    __slots__ = ("_ordinal", "_cudev")
    _ordinal: int
    _cudev: Any

    def __init__(self, device: int | str):
        if isinstance(device, str):
            ordinal = guarded("cuDeviceGetByPCIBusId", cu.device_ordinal, device)
        elif isinstance(device, bool) or not hasattr(device, "__index__"):
            raise bad_type("cuDeviceGet", f"a device ordinal (int) or PCI bus id (str), not {device!r}")
        else:
            index = device.__index__()
            if not -(1 << 31) <= index < 1 << 31:  # what cuda.bindings' conversion to a C int refuses
                raise bad_input("cuDeviceGet", OverflowError(f"device ordinal {index} does not fit a C int"))
            ordinal = guarded("cuDeviceGet", cu.device_ordinal, index)
        self._cudev = _cb.CUdevice(ordinal)
        self._ordinal = ordinal

    @classmethod
    def _from_ordinal(cls, ordinal: int) -> Device:
        dev = object.__new__(cls)
        dev._cudev = _cb.CUdevice(ordinal)
        dev._ordinal = ordinal
        return dev

    @staticmethod
    def count() -> int:
        return int(guarded("cuDeviceGetCount", cu.device_count))

    def name(self) -> str:
        return str(guarded("cuDeviceGetName", cu.device_name, self._ordinal))

    def pci_bus_id(self) -> str:
        return str(guarded("cuDeviceGetPCIBusId", cu.device_pci_bus_id, self._ordinal))

    def compute_capability(self) -> tuple[int, int]:
        cc = _capabilities.get(self._ordinal)
        if cc is None:
            cc = (_attribute(self._cudev, "COMPUTE_CAPABILITY_MAJOR"),
                  _attribute(self._cudev, "COMPUTE_CAPABILITY_MINOR"))
            _capabilities[self._ordinal] = cc
        return cc

    def total_memory(self) -> int:
        return int(guarded("cuDeviceTotalMem", cu.device_total_memory, self._ordinal))

    def get_attribute(self, attr: Any) -> Any:
        try:
            cb_attr = _cb.CUdevice_attribute(int(attr))
        except (TypeError, ValueError):
            raise from_code(1, "cuDeviceGetAttribute", f"no device attribute {attr!r}") from None
        value = int(guarded("cuDeviceGetAttribute", cu.device_attribute, self._ordinal, cb_attr))
        if int(attr) == int(device_attribute.COMPUTE_MODE):
            return compute_mode(value)
        return value

    def get_attributes(self) -> dict[Any, Any]:
        """Every attribute this driver answers, keyed by `device_attribute` member."""
        result: dict[Any, Any] = {}
        for name, att in sorted(device_attribute.__members__.items()):
            try:
                result[att] = self.get_attribute(att)
            except LogicError as exc:
                if exc.code != 1:  # CUDA_ERROR_INVALID_VALUE: an attribute newer than this driver
                    warnings.warn(f"CUDA driver raised '{exc}' when querying '{name}' on '{self}'", stacklevel=2)
        return result

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            att = device_attribute[name.upper()]
        except KeyError:
            raise AttributeError(f"'Device' object has no attribute {name!r}") from None
        return self.get_attribute(att)

    def make_context(self, flags: int = 0) -> Context:
        """Create a context on this device (cuCtxCreate) and push it: it becomes current."""
        op = "cuCtxCreate"
        flags = _uint(flags, op)
        sched = _SCHED.get(flags & 0x7)
        if sched is None or flags & ~_CTX_FLAGS_MASK:  # what the driver answers for them
            raise from_code(1, op)
        h = guarded(op, cu.create_context, self._ordinal, sched=sched, map_host=bool(flags & 0x8),
                    lmem_resize_to_max=bool(flags & 0x10), coredump=bool(flags & 0x20),
                    user_coredump=bool(flags & 0x40), sync_memops=bool(flags & 0x80))
        try:
            cu.pop_context()  # keep the driver's stack one deep; pushed below
        except ia.IronAccelError:
            pass
        ctx = Context._make(_cb.CUcontext(h), _CREATED, self._cudev)
        ctx.push()
        return ctx

    def retain_primary_context(self) -> Context:
        """The device's primary context (retained; not pushed)."""
        h = guarded("cuDevicePrimaryCtxRetain", cu.retain_primary_context, self._ordinal)
        return Context._make(_cb.CUcontext(h), _PRIMARY, self._cudev)

    def can_access_peer(self, other: Device) -> bool:
        if not isinstance(other, Device):
            raise bad_type("cuDeviceCanAccessPeer", f"other must be a Device, not {type(other).__name__}")
        return bool(guarded("cuDeviceCanAccessPeer", cu.can_access_peer, self._ordinal, other._ordinal))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other._ordinal == self._ordinal

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return self._ordinal

    def __repr__(self) -> str:
        return f"<Device {self._ordinal}>"


# -- contexts ---------------------------------------------------------------------


class Context:
    """pycuda.driver.Context: one CUDA context and PyCUDA's stack of them.

    Static methods (`pop`, `get_device`, `synchronize`, `get_current`,
    limits, cache and shared-memory configuration, peer access) act on this
    thread's current context, as in PyCUDA.
    """

    __slots__ = ("handle", "_h", "_valid", "_kind", "_cudev", "_ordinal", "_thread", "pools", "staging",
                 "nonblocking", "lock", "live", "__weakref__")
    handle: int
    _h: Any
    _valid: bool
    _kind: str
    _cudev: Any
    _ordinal: int
    _thread: int
    pools: bool
    staging: Any
    nonblocking: int
    lock: threading.Lock
    live: dict[int, None]  # stream-ordered allocations not yet freed: a context's destruction does not free them

    def __init__(self) -> None:
        raise bad_type("Context", "make contexts with Device.make_context() or Device.retain_primary_context()")

    @classmethod
    def _make(cls, h: Any, kind: str, cudev: Any) -> Context:
        ctx = object.__new__(cls)
        ctx._h = h
        ctx.handle = int(h)
        ctx._valid = True
        ctx._kind = kind
        ctx._cudev = cudev
        ctx._ordinal = int(cudev)
        ctx._thread = threading.get_ident()
        ctx.pools = not SYNC_ALLOC and bool(_attribute(cudev, "MEMORY_POOLS_SUPPORTED"))
        ctx.staging = None
        ctx.nonblocking = 0
        ctx.lock = threading.Lock()
        ctx.live = {}
        return ctx

    # -- the stack -------------------------------------------------------------

    def push(self) -> None:
        """Make this context current (on top of this thread's stack)."""
        if not self._valid:
            raise from_code(INVALID_CONTEXT, "cuCtxPushCurrent", "cannot push a detached context")
        try:
            _fast.bind(self.handle)
        except ia.IronAccelError as exc:
            raise translate(exc, "cuCtxPushCurrent") from None
        _local.stack.append(self)

    @staticmethod
    def pop() -> None:
        """Pop the current context off this thread's stack; the one below (if any) becomes current."""
        stack = _local.stack
        if not stack:
            raise from_code(INVALID_CONTEXT, "context::pop", "cannot pop non-current context")
        current = current_context()
        if current is None:
            raise from_code(INVALID_CONTEXT, "m_stack::pop", "cannot pop context from empty stack")
        stack.pop()
        _bind_top()

    @staticmethod
    def get_current() -> Context | None:
        return current_context()

    @staticmethod
    def attach(flags: int = 0) -> Context:
        """cuCtxAttach to the current context: a new handle object, pushed."""
        top = current_context()
        if top is not None:
            _fast.ensure(top.handle)
        if _uint(flags, "cuCtxAttach"):  # the driver defines no flags: CUDA_ERROR_INVALID_VALUE
            raise from_code(1, "cuCtxAttach")
        h = _cb.CUcontext(guarded("cuCtxAttach", cu.attach_context))
        ordinal = guarded("cuCtxGetDevice", cu.current_device_ordinal)
        if ordinal is None:  # what cuCtxGetDevice says with no context current
            raise from_code(INVALID_CONTEXT, "cuCtxGetDevice")
        cudev = _cb.CUdevice(ordinal)
        ctx = Context._make(h, _ATTACHED, cudev)
        ctx.push()
        return ctx

    def detach(self) -> None:
        """Release this context (destroying a created one); pops it if it was current."""
        if not self._valid:
            raise from_code(INVALID_CONTEXT, "context::detach", "cannot detach from invalid context")
        active = current_context() is self
        if active or self._thread == threading.get_ident():
            self._release()
        self._valid = False
        _bind_top()

    def _release(self) -> None:
        staging, self.staging = self.staging, None
        try:
            _fast.bind(self.handle)
            if staging is not None:
                staging.close()
            self._free_live()
            if self._kind == _PRIMARY:
                cu.release_primary_context(self._ordinal)
            elif self._kind == _CREATED:
                cu.destroy_context(self.handle)
            else:  # attached: drop the usage count cuCtxAttach added
                cu.detach_context(self.handle)
        except Exception as exc:
            warnings.warn(f"PyCUDA compat: releasing a context failed: {exc}", stacklevel=3)

    def _free_live(self) -> None:
        """Free the pool memory still allocated in this context (bound here).  cuCtxDestroy frees what cuMemAlloc
        gave a context, as PyCUDA's users rely on, but not stream-ordered pool memory, which the compat's mem_alloc
        uses: without this, memory still held when the context is detached would never be freed (its
        DeviceAllocation cannot free it once the context is gone)."""
        live, self.live = self.live, {}
        for dp in live:
            try:
                _fast.mem_free_async(dp, _fast.LEGACY)
            except ia.IronAccelError:
                pass
        if live:
            try:
                cu.synchronize_current_context()
            except ia.DriverError as exc:  # the driver's failure is not this clean-up's to report
                if exc.code is None:
                    raise

    def __del__(self) -> None:
        if getattr(self, "_valid", False):
            try:
                self.detach()
            except Exception:
                pass

    # -- the current context ---------------------------------------------------

    @staticmethod
    def get_device() -> Device:
        return Device._from_ordinal(_current("cuCtxGetDevice")._ordinal)

    @staticmethod
    def synchronize() -> None:
        _current("cuCtxSynchronize")
        guarded("cuCtxSynchronize", cu.synchronize_current_context)

    @staticmethod
    def set_limit(limit: Any, value: int) -> None:
        _current("cuCtxSetLimit")
        op = "cuCtxSetLimit"
        name, value = enum_value("CUlimit", limit, op).name, _flags(value, op, "value")
        if not 0 <= value < 1 << 64:  # what the binding's size_t conversion refuses
            raise bad_input(op, OverflowError(f"a limit of {value} does not fit a size_t"))
        guarded(op, cu.set_current_context_limit, name, value)

    @staticmethod
    def get_limit(limit: Any) -> int:
        _current("cuCtxGetLimit")
        name = enum_value("CUlimit", limit, "cuCtxGetLimit").name
        return int(guarded("cuCtxGetLimit", cu.current_context_limit, name))

    @staticmethod
    def get_cache_config() -> Any:
        from ._enums import func_cache

        _current("cuCtxGetCacheConfig")
        return func_cache[str(guarded("cuCtxGetCacheConfig", cu.current_context_cache_config)).upper()]

    @staticmethod
    def set_cache_config(config: Any) -> None:
        op = "cuCtxSetCacheConfig"
        _current(op)
        name = enum_value("CUfunc_cache", config, op).name.removeprefix("CU_FUNC_CACHE_").lower()  # prefer_l1, ...
        guarded(op, cu.set_current_context_cache_config, name)

    @staticmethod
    def get_shared_config() -> Any:
        from ._enums import shared_config

        op = "cuCtxGetSharedMemConfig"
        _current(op)
        return shared_config[str(guarded(op, cu.current_context_shared_memory_config)).upper() + "_BANK_SIZE"]

    @staticmethod
    def set_shared_config(config: Any) -> None:
        _current("cuCtxSetSharedMemConfig")
        op = "cuCtxSetSharedMemConfig"
        name = enum_value("CUsharedconfig", config, op).name  # CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE, ...
        guarded(op, cu.set_current_context_shared_memory_config,
                name.removeprefix("CU_SHARED_MEM_CONFIG_").removesuffix("_BANK_SIZE").lower())

    @staticmethod
    def enable_peer_access(peer: Context, flags: int = 0) -> None:
        op = "cuCtxEnablePeerAccess"
        _current(op)
        call(op, _peer(peer, op), _flags(flags, op))

    @staticmethod
    def disable_peer_access(peer: Context) -> None:
        op = "cuCtxDisablePeerAccess"
        _current(op)
        call(op, _peer(peer, op))

    def get_api_version(self) -> int:
        if not self._valid:  # its handle is gone with it: never hand the driver a destroyed context
            raise from_code(INVALID_CONTEXT, "cuCtxGetApiVersion", "the context was detached")
        return int(guarded("cuCtxGetApiVersion", cu.context_api_version, self._h))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Context) and other.handle == self.handle

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.handle)

    def __repr__(self) -> str:
        state = "" if self._valid else " detached"
        return f"<Context {self._kind} 0x{self.handle:x} on device {self._ordinal}{state}>"


def _peer(peer: Any, routine: str) -> Any:
    """The handle of peer context `peer` (a valid Context)."""
    if not isinstance(peer, Context):
        raise bad_type(routine, f"peer must be a Context, not {type(peer).__name__}")
    if not peer._valid:
        raise from_code(INVALID_CONTEXT, routine, "the peer context was detached")
    return peer._h
