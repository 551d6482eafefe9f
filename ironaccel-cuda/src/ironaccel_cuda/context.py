"""Explicit contexts and green contexts (SM partitions).

    ctx = dev.create_context()          # a new (non-primary) context, not made current
    with ctx:                           # push ... pop on this thread
        ...                             # driver calls here act in ctx
    s = ctx.create_stream(); mod = ctx.load_module(code)
    ctx.close()                         # destroys it with its streams and modules

    a, b = dev.split_sms(32, groups=2)  # two green contexts of at least 32 SMs each
    a.sm_count; s = a.create_stream()   # work on s runs only on a's SMs

Ironaccel itself works in the primary context (see `device`); an explicit
context is for code that needs its own (separate limits, cache config,
isolation of modules).  While a context is pushed on a thread, the driver
acts in it there -- for ironaccel's own creation calls on that thread too --
until it is popped.  A green context owns a disjoint set of SMs:
kernels launched on its streams run only there.  Launch kernels from a
`Library` there (context-independent code); a Function from `dev.load_module`
belongs to the primary context.  A green context can be current on one
thread at a time.  Closing either kind closes the streams and modules made
from it first; using a closed one is `ClosedError`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from . import _core, _driver
from ._driver import call, driver, try_call
from .errors import InvalidArgument, closed, code_name, invalid
from .module import Module, load_module
from .stream import Stream, check_priority

if TYPE_CHECKING:
    from .device import Device

__all__ = ["Context", "GreenContext", "attach_context", "context_api_version", "context_at", "create_context",
           "current_context_shared_memory_config", "destroy_context", "detach_context", "init_driver", "pop_context",
           "push_context", "release_primary_context", "retain_primary_context",
           "set_current_context_shared_memory_config", "split_sms"]

CU_STREAM_NON_BLOCKING = 1
CU_GREEN_CTX_DEFAULT_STREAM = 1
CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING = 1
_CTX_FLAGS = {"auto": 0, "spin": 1, "yield": 2, "blocking_sync": 4}


class _ContextBase:
    """What explicit and green contexts share: a CUcontext, its children, push/pop, streams, modules."""

    _ctx: Any
    device: Device
    _kind = "context"

    def create_stream(self, priority: int = 0) -> Stream:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _init_base(self, ctx: Any, device: Device) -> None:
        self._ctx = ctx
        self.device = device
        self._children: weakref.WeakSet[Any] = weakref.WeakSet()
        self._pushed = threading.local()
        self._default: Stream | None = None

    @property
    def closed(self) -> bool:
        return self._ctx is None

    @property
    def handle(self) -> int:
        """The CUcontext address."""
        self._check("Context.handle")
        return int(self._ctx)

    def _check(self, op: str) -> None:
        if self._ctx is None:
            raise closed(op, self._kind)

    def push(self) -> None:
        """Make this context current on the calling thread, above the one that was (cuCtxPushCurrent)."""
        op = "cuCtxPushCurrent"
        self._check(op)
        call(op, self._ctx)
        _core.forget_current()
        self._depth(+1)

    def pop(self) -> None:
        """Undo this thread's last `push()` of this context (cuCtxPopCurrent)."""
        op = "cuCtxPopCurrent"
        self._check(op)
        if self._depth(0) == 0:
            raise invalid(op, f"this {self._kind} was not pushed on this thread")
        call(op)
        _core.forget_current()
        self._depth(-1)

    def _depth(self, change: int) -> int:
        depth = getattr(self._pushed, "depth", 0) + change
        self._pushed.depth = depth
        return depth

    def __enter__(self) -> Any:
        self.push()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ctx is not None:
            self.pop()

    @contextmanager
    def _current(self, op: str) -> Iterator[None]:
        """This context current on the calling thread for one driver call, then the previous one again."""
        self._check(op)
        call("cuCtxPushCurrent", self._ctx)
        try:
            yield
        finally:
            call("cuCtxPopCurrent")
            _core.forget_current()

    def _adopt(self, child: Any) -> None:
        self._children.add(child)

    @property
    def default_stream(self) -> Stream:
        """A stream of this context used where no stream is given (made on first use)."""
        if self._default is None:
            self._default = self.create_stream()
        return self._default

    def load_module(self, code: Any) -> Module:
        """Load an ObjectCode, CUBIN/PTX/fatbin bytes or a path into this context."""
        self._check("cuModuleLoadData")
        return load_module(self.device, code, context=self)

    def synchronize(self) -> None:
        """Wait for all work of this context (cuCtxSynchronize)."""
        op = "cuCtxSynchronize"
        with self._current(op):
            call(op)

    def _close_children(self) -> None:
        for child in list(self._children):
            try:
                child.close()
            except Exception:
                pass
        self._children = weakref.WeakSet()
        self._default = None

    def __del__(self) -> None:
        if getattr(self, "_ctx", None) is not None:
            try:
                self.close()
            except Exception:
                pass

    def __repr__(self) -> str:
        state = "closed" if self._ctx is None else hex(int(self._ctx))
        return f"<{type(self).__name__} {state} on cuda:{self.device.ordinal}>"


class Context(_ContextBase):
    """An explicit (non-primary) CUDA context of one device.  Make one with `dev.create_context()`."""

    def __init__(self) -> None:
        raise TypeError("create contexts with Device.create_context()")

    @classmethod
    def _create(cls, device: Device, sched: str = "auto", map_host: bool = False) -> Context:
        op = "cuCtxCreate"
        if not isinstance(sched, str) or sched not in _CTX_FLAGS:
            raise invalid(op, f"sched must be one of {sorted(_CTX_FLAGS)}, got {sched!r}")
        flags = _CTX_FLAGS[sched] | (0x8 if map_host else 0)
        try:
            ctx = call(op, None, flags, device._state.cudev)
        except TypeError:  # cuda.bindings 12: cuCtxCreate(flags, dev)
            ctx = call(op, flags, device._state.cudev)
        call("cuCtxPopCurrent")  # cuCtxCreate made it current: creating it changes nothing for this thread
        _core.forget_current()
        c = object.__new__(cls)
        c._init_base(ctx, device)
        _register(c)
        return c

    def create_stream(self, priority: int = 0, non_blocking: bool = True) -> Stream:
        """A new owned stream in this context."""
        op = "cuStreamCreateWithPriority"
        check_priority(op, priority)
        with self._current(op):
            h = call(op, CU_STREAM_NON_BLOCKING if non_blocking else 0, priority)
        s = Stream._make(h, self.device, owned=True, priority=priority, non_blocking=non_blocking)
        self._adopt(s)
        return s

    def close(self) -> None:
        """Destroy the context (cuCtxDestroy) after closing its streams and modules.  Idempotent."""
        ctx = self._ctx
        if ctx is None:
            return
        self._close_children()
        self._ctx = None
        if not _driver.forked:
            call("cuCtxDestroy", ctx)
            _core.forget_current()


def context_api_version(context: Any) -> int:
    """The driver API version a context was made for (cuCtxGetApiVersion), e.g. 3020: for a Context or
    GreenContext, or any CUcontext (its address or the cuda.bindings object), another library's too."""
    op = "cuCtxGetApiVersion"
    if isinstance(context, _ContextBase):
        context._check(op)
        handle = context._ctx
    elif isinstance(context, bool) or not (isinstance(context, int) and 0 < context < 1 << 64
                                           or hasattr(context, "getPtr")):
        raise invalid(op, f"expected a Context or a CUcontext (its address), got {context!r}")
    else:
        handle = driver().CUcontext(int(context))
    return int(call(op, handle))


def context_at(address: int) -> Any:
    """The open Context or GreenContext whose CUcontext is at `address`, or None."""
    with _registry_lock:
        return _registry.get(address)


_registry: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()


def _register(c: _ContextBase) -> None:
    with _registry_lock:
        _registry[int(c._ctx)] = c


class GreenContext(_ContextBase):
    """A green context: a partition of one device's SMs.  Make them with `dev.split_sms(...)`."""

    _kind = "green context"
    sm_count: int
    _green: Any

    def __init__(self) -> None:
        raise TypeError("create green contexts with Device.split_sms()")

    @classmethod
    def _create(cls, device: Device, resource: Any) -> GreenContext:
        """A green context over one CUdevResource, or a list of them (an SM group and a workqueue config)."""
        drv = driver()
        resources = list(resource) if isinstance(resource, (list, tuple)) else [resource]
        desc = call("cuDevResourceGenerateDesc", resources, len(resources))
        green = call("cuGreenCtxCreate", desc, device._state.cudev, CU_GREEN_CTX_DEFAULT_STREAM)
        g = object.__new__(cls)
        g._green = green
        try:
            g._init_base(call("cuCtxFromGreenCtx", green), device)
            sm = call("cuGreenCtxGetDevResource", green, drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM)
            g.sm_count = int(sm.sm.smCount)
        except BaseException:
            g._ctx = None  # nothing to close twice: the green context goes here
            call("cuGreenCtxDestroy", green)
            raise
        _register(g)
        return g

    def create_stream(self, priority: int = 0) -> Stream:
        """A new owned stream whose work runs on this partition's SMs (cuGreenCtxStreamCreate, non-blocking)."""
        op = "cuGreenCtxStreamCreate"
        self._check(op)
        check_priority(op, priority)
        h = call(op, self._green, CU_STREAM_NON_BLOCKING, priority)
        s = Stream._make(h, self.device, owned=True, priority=priority, non_blocking=True)
        self._adopt(s)
        return s

    def close(self) -> None:
        """Destroy the green context (cuGreenCtxDestroy) after closing its streams and modules.  Idempotent."""
        if self._ctx is None:
            return
        self._close_children()
        self._ctx = None
        green, self._green = self._green, None
        if not _driver.forked:
            call("cuGreenCtxDestroy", green)

    def __repr__(self) -> str:
        state = "closed" if self._ctx is None else f"{self.sm_count} SMs"
        return f"<GreenContext {state} on cuda:{self.device.ordinal}>"


def split_sms(device: Device, sm_count: int, groups: int | None = None, *, coscheduling: bool = True
              ) -> list[GreenContext]:
    """Green contexts over disjoint groups of at least `sm_count` SMs each (cuDevSmResourceSplitByCount).

    `groups` is how many (default: as many as fit).  The driver rounds
    `sm_count` up to the partition granularity (`sm_count` of each result says
    what each got); `coscheduling=False` lowers it (no large clusters then).
    Asking for more SMs or groups than the device has is InvalidArgument.
    """
    op = "cuDevSmResourceSplitByCount"
    total = device.attributes.multiprocessor_count
    if isinstance(sm_count, bool) or not isinstance(sm_count, int) or sm_count <= 0:
        raise invalid(op, f"sm_count must be a positive int, got {sm_count!r}")
    if sm_count > total:
        raise invalid(op, f"a partition of {sm_count} SMs is larger than cuda:{device.ordinal} ({total} SMs)")
    if groups is not None and (isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0):
        raise invalid(op, f"groups must be a positive int or None, got {groups!r}")
    if groups is not None and groups * sm_count > total:
        raise invalid(op, f"{groups} groups of at least {sm_count} SMs is more than cuda:{device.ordinal} has "
                          f"({total} SMs)")
    drv = driver()
    device._bind_here()
    whole = call("cuDeviceGetDevResource", device._state.cudev, drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM)
    flags = 0 if coscheduling else CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING
    err, out = try_call(op, groups if groups is not None else total, whole, flags, sm_count)
    if err:
        raise InvalidArgument("cuda", op, err, code_name(err),
                              f"{groups or 'as many'} groups of at least {sm_count} SMs of {total} cannot be made")
    parts, made = list(out[0]), int(out[1])
    if groups is not None and made < groups:
        raise invalid(op, f"only {made} groups of at least {sm_count} SMs fit on cuda:{device.ordinal} ({total} SMs, "
                          f"after rounding to its partition granularity), not {groups}")
    result: list[GreenContext] = []
    try:
        for resource in parts[:made]:
            result.append(GreenContext._create(device, resource))
    except BaseException:
        for g in result:
            g.close()
        raise
    return result


# -- contexts by handle ---------------------------------------------------------------------------------------------
# For code that keeps a context stack of its own (the PyCUDA compat, another library's contexts): these take and give
# CUcontext addresses and device ordinals, act on the calling thread's driver stack, and own nothing -- no object
# tracks what they create, retain or attach, so the caller releases it.  `Device.create_context` / `Context` are the
# owning form; `current_context_handle` says what is current.

_CTX_MAP_HOST, _CTX_LMEM_RESIZE_TO_MAX = 0x08, 0x10  # CU_CTX_MAP_HOST, CU_CTX_LMEM_RESIZE_TO_MAX
_CTX_COREDUMP, _CTX_USER_COREDUMP, _CTX_SYNC_MEMOPS = 0x20, 0x40, 0x80  # CU_CTX_COREDUMP_ENABLE, ..., SYNC_MEMOPS
_SHARED_CONFIGS = {"default": 0, "four_byte": 1, "eight_byte": 2}  # CU_SHARED_MEM_CONFIG_*_BANK_SIZE
_SHARED_CONFIGS_BY_VALUE = {v: k for k, v in _SHARED_CONFIGS.items()}


def _ordinal(ordinal: Any, op: str) -> int:
    if isinstance(ordinal, bool) or not isinstance(ordinal, int) or not 0 <= ordinal < 1 << 31:
        raise invalid(op, f"expected a device ordinal (a non-negative int), got {ordinal!r}")
    return ordinal


def _handle(context: Any, op: str) -> Any:
    if isinstance(context, bool) or not isinstance(context, int) or not 0 < context < 1 << 64:
        raise invalid(op, f"expected a CUcontext address (a positive int below 2**64), got {context!r}")
    return driver().CUcontext(context)


def _bool(name: str, value: Any, op: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(op, f"{name} must be a bool, got {value!r}")
    return value


def init_driver() -> None:
    """Initialise the driver now (cuInit, once per process) rather than at the first call that needs it;
    NotAvailable says why it cannot be (no driver library, no device, a forked child)."""
    driver()


def create_context(ordinal: int, *, sched: str = "auto", map_host: bool = False, lmem_resize_to_max: bool = False,
                   sync_memops: bool = False, coredump: bool = False, user_coredump: bool = False) -> int:
    """The address of a new context of device `ordinal` (cuCtxCreate), pushed on the calling thread's stack: it
    is current when this returns, as the driver leaves it.  `sched` and `map_host` are `Device.create_context`'s;
    the other flags are the driver's CU_CTX_* of the same names.  `destroy_context` ends it."""
    op = "cuCtxCreate"
    ordinal = _ordinal(ordinal, op)
    if not isinstance(sched, str) or sched not in _CTX_FLAGS:
        raise invalid(op, f"sched must be one of {sorted(_CTX_FLAGS)}, got {sched!r}")
    flags = (_CTX_FLAGS[sched] | (_CTX_MAP_HOST if _bool("map_host", map_host, op) else 0)
             | (_CTX_LMEM_RESIZE_TO_MAX if _bool("lmem_resize_to_max", lmem_resize_to_max, op) else 0)
             | (_CTX_SYNC_MEMOPS if _bool("sync_memops", sync_memops, op) else 0)
             | (_CTX_COREDUMP if _bool("coredump", coredump, op) else 0)
             | (_CTX_USER_COREDUMP if _bool("user_coredump", user_coredump, op) else 0))
    cudev = driver().CUdevice(ordinal)
    try:
        ctx = call(op, None, flags, cudev)
    except TypeError:  # cuda.bindings 12: cuCtxCreate(flags, dev)
        ctx = call(op, flags, cudev)
    _core.forget_current()
    return int(ctx)


def destroy_context(context: int) -> None:
    """Destroy the context at `context` (cuCtxDestroy), with the memory, streams and modules made in it; if it is
    current on the calling thread, the driver pops it.  For a context from `create_context`."""
    op = "cuCtxDestroy"
    call(op, _handle(context, op))
    _core.forget_current()


def push_context(context: int) -> None:
    """Make the context at `context` current on the calling thread, above the one that was (cuCtxPushCurrent)."""
    op = "cuCtxPushCurrent"
    call(op, _handle(context, op))
    _core.forget_current()


def pop_context() -> int:
    """Pop the calling thread's current context (cuCtxPopCurrent) and return its address; the one below (if any)
    is current again.  The driver's CUDA_ERROR_INVALID_CONTEXT when none is current."""
    ctx = call("cuCtxPopCurrent")
    _core.forget_current()
    return int(ctx) if ctx is not None else 0


def attach_context() -> int:
    """The address of the calling thread's current context, with its usage count raised (cuCtxAttach, a
    deprecated call kept for code written against it); `detach_context` lowers it again."""
    op = "cuCtxAttach"
    return int(call(op, 0))


def detach_context(context: int) -> None:
    """Lower the usage count `attach_context` raised (cuCtxDetach); the driver destroys the context at zero."""
    op = "cuCtxDetach"
    call(op, _handle(context, op))
    _core.forget_current()


def retain_primary_context(ordinal: int) -> int:
    """The address of device `ordinal`'s primary context, retained (cuDevicePrimaryCtxRetain; the driver creates
    it on the first retain) and not made current.  Give it back with `release_primary_context`."""
    op = "cuDevicePrimaryCtxRetain"
    return int(call(op, driver().CUdevice(_ordinal(ordinal, op))))


def release_primary_context(ordinal: int) -> None:
    """Release one retain of device `ordinal`'s primary context (cuDevicePrimaryCtxRelease); the driver destroys
    it when no retain is left.  Ironaccel's own Devices hold one retain for the process."""
    op = "cuDevicePrimaryCtxRelease"
    call(op, driver().CUdevice(_ordinal(ordinal, op)))


def current_context_shared_memory_config() -> str:
    """The shared-memory bank size of the context current on the calling thread (cuCtxGetSharedMemConfig):
    "default", "four_byte" or "eight_byte".  Devices since Volta have fixed banks: the driver answers, not acts."""
    return _SHARED_CONFIGS_BY_VALUE[int(call("cuCtxGetSharedMemConfig"))]


def set_current_context_shared_memory_config(config: str) -> None:
    """Ask for a shared-memory bank size in the context current on the calling thread (cuCtxSetSharedMemConfig):
    "default", "four_byte" or "eight_byte" (a request the driver may ignore on devices with fixed banks)."""
    op = "cuCtxSetSharedMemConfig"
    if not isinstance(config, str) or config not in _SHARED_CONFIGS:
        raise invalid(op, f"config must be one of {sorted(_SHARED_CONFIGS)}, got {config!r}")
    call(op, driver().CUsharedconfig(_SHARED_CONFIGS[config]))
