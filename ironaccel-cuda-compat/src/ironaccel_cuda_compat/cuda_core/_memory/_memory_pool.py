"""cuda.core's `_MemPool`: the base of the resources over a driver memory pool (device, pinned, managed).

Each resource holds an ironaccel `DriverPool`: one of its own (`DriverPool.create`,
when options are given) or the driver's current pool for its kind
(`DriverPool.current`).  Allocation is `DriverPool.allocate` (cuMemAllocFromPoolAsync;
the device's default pool goes through ironaccel's compiled `Device.alloc`), so a
Buffer holds an ironaccel `DeviceBuf` and closing it is ironaccel's stream-ordered
free.  As in cuda.core, `close()` only drops the resource's reference: a pool of
its own is destroyed once its buffers and `attributes` bundles are gone too.
"""

from __future__ import annotations

from typing import Any

from ironaccel_cuda import free_async

from .. import _ia
from .._stream import Stream, Stream_accept, for_device
from .._utils.cuda_utils import call, driver, from_ironaccel, guarded
from ._buffer import Buffer, MemoryResource
from ._ipc import IpcResource, IpcState

__all__ = ["_MemPool", "_MemPoolAttributes"]

_new = object.__new__
_ATTR_NAMES = ("release_threshold", "reserved_mem_current", "reserved_mem_high", "reuse_allow_internal_dependencies",
               "reuse_allow_opportunistic", "reuse_follow_event_dependencies", "used_mem_current", "used_mem_high")


def _refuse_capture(s: Any) -> None:
    """RuntimeError when `s` is capturing a graph (checked for GraphBuilders: a Stream argument takes the fast path
    with no driver call)."""
    if guarded(lambda: s.capture_status) != "none":  # active, or invalidated and not ended yet
        raise RuntimeError("cannot perform memory operations on a capturing stream (consider using "
                           "GraphMemoryResource).")


class _MemPoolAttributes:
    """The pool's attributes (its ironaccel DriverPool's), read from the driver when asked; keeps the pool alive."""

    __slots__ = ("_dpool",)
    _dpool: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("_MemPoolAttributes cannot be instantiated directly. Please use MemoryResource APIs.")

    @classmethod
    def _init(cls, dpool: Any) -> _MemPoolAttributes:
        self = _new(cls)
        self._dpool = dpool
        return self

    def _get(self, name: str) -> Any:
        return guarded(getattr, self._dpool, name)

    def _usage(self) -> Any:
        return guarded(self._dpool.usage)

    @property
    def reuse_follow_event_dependencies(self) -> bool:
        return bool(self._get("reuse_follow_event_dependencies"))

    @property
    def reuse_allow_opportunistic(self) -> bool:
        return bool(self._get("reuse_allow_opportunistic"))

    @property
    def reuse_allow_internal_dependencies(self) -> bool:
        return bool(self._get("reuse_allow_internal_dependencies"))

    @property
    def release_threshold(self) -> int:
        return int(self._get("release_threshold"))

    @property
    def reserved_mem_current(self) -> int:
        return int(self._usage().reserved)

    @property
    def reserved_mem_high(self) -> int:
        return int(self._usage().reserved_high)

    @property
    def used_mem_current(self) -> int:
        return int(self._usage().used)

    @property
    def used_mem_high(self) -> int:
        return int(self._usage().used_high)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)}' for n in _ATTR_NAMES)})"


class _MemPool(IpcResource, MemoryResource):
    """A memory resource over one driver pool (`_dpool`, an ironaccel DriverPool); IPC through `_ipc.IpcResource`."""

    __slots__ = ("_device", "_ordinal", "_dpool", "_pool", "_owned", "_ipc", "_closed")
    _buffer_class: Any = Buffer

    def _bind_pool(self, device: Any, dpool: Any, *, owned: bool, ipc: bool = False) -> None:
        self._device = device
        self._ordinal = device.ordinal
        self._dpool = dpool
        self._pool = dpool._h
        self._owned = owned
        self._ipc = IpcState.created(dpool) if ipc else None
        self._closed = False

    def _bind_mapped(self, device: Any, state: IpcState) -> None:
        """Fill this new instance as a resource mapped from another process (IpcResource._map)."""
        self._bind_pool(device, state.pool, owned=True)
        self._ipc = state

    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        """`size` bytes from the pool, stream-ordered on `stream` (ironaccel's DriverPool.allocate)."""
        if stream.__class__ is Stream:
            s = stream
        else:
            s = Stream_accept(stream)
            if s is not stream:
                _refuse_capture(s)
        if s._ordinal != self._ordinal:
            s = for_device(s, self._ordinal)
        if self._closed:
            raise RuntimeError("the memory resource is closed")
        if self._ipc is not None and self._ipc.mapped:
            raise TypeError("Cannot allocate from a mapped IPC-enabled memory resource")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"size must be a non-negative int, got {size!r}")
        if not size:
            return self._buffer_class._init(0, size, self, stream=s)
        try:
            mem = self._dpool.allocate(size, "uint8", s)
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        return self._buffer_class._adopt(mem, size, self, s)

    def deallocate(self, ptr: Any, size: int, *, stream: Any = None) -> None:
        """Free memory at `ptr` stream-ordered on `stream` (cuMemFreeAsync)."""
        s = Stream_accept(stream)
        if size:
            guarded(free_async, int(ptr), s)

    def close(self) -> None:
        """Retire the resource; a pool of its own goes once its buffers and attribute bundles are gone."""
        self._closed = True
        self._dpool = None
        if self._ipc is not None:
            self._ipc.close()

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def attributes(self) -> _MemPoolAttributes:
        if self._closed:
            raise RuntimeError("the memory resource is closed")
        return _MemPoolAttributes._init(self._dpool)

    @property
    def handle(self) -> Any:
        return self._pool

    @property
    def is_handle_owned(self) -> bool:
        return self._owned

    @property
    def is_device_accessible(self) -> bool:
        return True

    def _not_ipc_enabled(self) -> RuntimeError:
        return RuntimeError("Memory resource is not IPC-enabled")
