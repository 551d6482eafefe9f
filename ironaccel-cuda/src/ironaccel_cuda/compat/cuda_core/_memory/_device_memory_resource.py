"""cuda.core's `DeviceMemoryResource` over the device's stream-ordered memory pool.

`allocate(size, stream=s)` is ironaccel's `Device.alloc` (cuMemAllocAsync on the
current pool, the compiled hot path) and `Buffer.close(s)` its stream-ordered free.
As cuda.core does, the pool's release threshold is raised to the maximum the first
time, so freed memory stays cached in the pool instead of going back to the OS at
every synchronization.  Pools of its own (`DeviceMemoryResourceOptions`) wait for
issue 10.
"""

from __future__ import annotations

import multiprocessing.reduction
from dataclasses import dataclass
from typing import Any

from .. import _ia, _needs
from .._missing import missing_error
from .._utils.cuda_utils import call, check_or_create_options, driver, from_ironaccel
from ._buffer import Buffer, MemoryResource
from ._ipc import IpcResource, IpcState, _deep_reduce_device_memory_resource

__all__ = ["DeviceMemoryResource", "DeviceMemoryResourceOptions"]

_new = object.__new__
_MAX_THRESHOLD = 0xFFFFFFFFFFFFFFFF


@dataclass
class DeviceMemoryResourceOptions:
    """Options for a pool of the resource's own (not available yet: issue 10)."""

    ipc_enabled: bool = False
    max_size: int = 0


class _MemPoolAttributes:
    """The pool's CU_MEMPOOL_ATTR_* values, read when asked."""

    __slots__ = ("_pool",)
    _pool: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("_MemPoolAttributes cannot be instantiated directly. Please use MemoryResource APIs.")

    @classmethod
    def _init(cls, pool: Any) -> _MemPoolAttributes:
        self = _new(cls)
        self._pool = pool
        return self

    def _get(self, name: str) -> int:
        return int(call("cuMemPoolGetAttribute", self._pool, getattr(driver.CUmemPool_attribute, name)))

    @property
    def reuse_follow_event_dependencies(self) -> bool:
        return bool(self._get("CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES"))

    @property
    def reuse_allow_opportunistic(self) -> bool:
        return bool(self._get("CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC"))

    @property
    def reuse_allow_internal_dependencies(self) -> bool:
        return bool(self._get("CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES"))

    @property
    def release_threshold(self) -> int:
        return self._get("CU_MEMPOOL_ATTR_RELEASE_THRESHOLD")

    @property
    def reserved_mem_current(self) -> int:
        return self._get("CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT")

    @property
    def reserved_mem_high(self) -> int:
        return self._get("CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH")

    @property
    def used_mem_current(self) -> int:
        return self._get("CU_MEMPOOL_ATTR_USED_MEM_CURRENT")

    @property
    def used_mem_high(self) -> int:
        return self._get("CU_MEMPOOL_ATTR_USED_MEM_HIGH")

    def __repr__(self) -> str:
        names = ("release_threshold", "reserved_mem_current", "reserved_mem_high", "reuse_allow_internal_dependencies",
                 "reuse_allow_opportunistic", "reuse_follow_event_dependencies", "used_mem_current", "used_mem_high")
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)}' for n in names)})"


class DeviceMemoryResource(IpcResource, MemoryResource):
    """Stream-ordered device memory from the device's current memory pool."""

    __slots__ = ("_device", "_ordinal", "_alloc", "_pool", "_closed", "_own", "_ipc")
    _alloc: Any  # Device.alloc, or the own pool's allocate, or the refusal of a mapped resource

    def __init__(self, device_id: Any, options: Any = None) -> None:
        from .._device import Device

        dev = Device(device_id)
        self._device = dev
        self._ordinal = dev.ordinal
        self._closed = False
        self._own = None  # a DriverPool of the resource's own (options given)
        self._ipc = None  # _ipc.IpcState of an IPC-enabled resource
        if options is not None:
            opts = check_or_create_options(DeviceMemoryResourceOptions, options, "DeviceMemoryResource options")
            if not opts.ipc_enabled:
                raise missing_error("DeviceMemoryResource(options=...) without ipc_enabled", _needs.POOLS)
            _create_ipc_pool(self, dev, opts)
            return
        self._alloc = dev.alloc
        self._pool = call("cuDeviceGetMemPool", dev._state.cudev)
        attr = driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
        err, threshold = _ia.try_call("cuMemPoolGetAttribute", self._pool, attr)
        if not err and int(threshold) == 0:
            call("cuMemPoolSetAttribute", self._pool, attr, driver.cuuint64_t(_MAX_THRESHOLD))

    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        """`size` bytes on the device, stream-ordered on `stream` (ironaccel's Device.alloc)."""
        from .._stream import Stream, Stream_accept, for_device

        s = stream if stream.__class__ is Stream else _not_capturing(Stream_accept(stream))
        if s._ordinal != self._ordinal:
            s = for_device(s, self._ordinal)
        if self._closed:
            raise RuntimeError("the memory resource is closed")
        b = _new(Buffer)
        if size:
            try:
                mem = self._alloc(size, "uint8", s)
            except _ia.DriverError as exc:
                raise from_ironaccel(exc) from None
            b._ptr = mem.ptr  # type: ignore[assignment]  # an int while the buffer is open
        else:
            mem = None
            b._ptr = 0
        b._size = size
        b._mr = self
        b._owner = None
        b._mem = mem
        b._stream = s
        b._free_stream = None
        b._attrs = None
        return b

    def deallocate(self, ptr: Any, size: int, *, stream: Any = None) -> None:
        """Free memory at `ptr` stream-ordered on `stream` (cuMemFreeAsync)."""
        from .._stream import Stream_accept

        s = Stream_accept(stream)
        if size:
            call("cuMemFreeAsync", driver.CUdeviceptr(int(ptr)), s._h)

    def close(self) -> None:
        """Retire the resource; a pool of its own is destroyed once its last buffer is freed."""
        self._closed = True
        own, self._own = self._own, None
        if own is not None:
            own.close()
        if self._ipc is not None:
            self._ipc.close()

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def attributes(self) -> _MemPoolAttributes:
        return _MemPoolAttributes._init(self._pool)

    @property
    def handle(self) -> Any:
        return self._pool

    @property
    def is_handle_owned(self) -> bool:
        return self._own is not None or self._ipc is not None

    @property
    def device_id(self) -> int:
        return self._ordinal

    @property
    def is_device_accessible(self) -> bool:
        return True

    @property
    def is_host_accessible(self) -> bool:
        return False

    @property
    def peer_accessible_by(self) -> frozenset[Any]:
        """The other devices with read-write access to the pool (read from the driver each time).

        Setting it needs pools of the resource's own (issue 10); ironaccel's
        `Device.enable_peer_access` opens a device's pool to a peer.
        """
        from .._device import Device

        return _Devices(Device(i) for i in range(_ia.device_count())
                        if i != self._ordinal and DMR_mempool_get_access(self, i) == "rw")

    @peer_accessible_by.setter
    def peer_accessible_by(self, devices: Any) -> None:
        raise missing_error("setting DeviceMemoryResource.peer_accessible_by", _needs.POOLS)

    # -- IPC: the methods are _ipc.IpcResource's ------------------------------------

    @classmethod
    def from_allocation_handle(cls, device_id: Any, alloc_handle: Any) -> DeviceMemoryResource:
        """Map another process's IPC-enabled resource here (a mapped resource: it imports buffers, never allocates)."""
        return cls._map(device_id, alloc_handle)  # type: ignore[return-value]

    def _bind_mapped(self, dev: Any, state: Any) -> None:
        self._device = dev
        self._ordinal = dev.ordinal
        self._closed = False
        self._own = None
        self._ipc = state
        self._alloc = _refuse_mapped
        self._pool = state.pool._h

    def __reduce__(self) -> tuple[Any, ...]:
        if self._ipc is not None:
            return (DeviceMemoryResource.from_registry, (self.uuid,))
        return (DeviceMemoryResource, (self._ordinal,))

    def __repr__(self) -> str:
        return f"<DeviceMemoryResource device={self._ordinal}>"


class _Devices(frozenset):  # type: ignore[type-arg]
    """A set of Devices that also answers `ordinal in devices`."""

    def __contains__(self, item: object) -> bool:
        if isinstance(item, int) and not isinstance(item, bool):
            return any(d.ordinal == item for d in self)
        return frozenset.__contains__(self, item)


def _not_capturing(s: Any) -> Any:
    """`s`, unless it is capturing a graph (a GraphBuilder's stream): graph memory is GraphMemoryResource's."""
    if int(call("cuStreamIsCapturing", s._h)) == 1:  # CU_STREAM_CAPTURE_STATUS_ACTIVE
        raise RuntimeError("DeviceMemoryResource cannot perform memory operations on a capturing stream (consider "
                           "using GraphMemoryResource).")
    return s


def _refuse_mapped(size: int, dtype: Any, stream: Any) -> Any:
    raise TypeError("Cannot allocate from a mapped IPC-enabled memory resource")


def _create_ipc_pool(mr: DeviceMemoryResource, dev: Any, opts: DeviceMemoryResourceOptions) -> None:
    """Give `mr` an IPC-enabled DriverPool of its own (`opts.max_size` bytes at most) and its allocation handle."""
    try:
        pool = dev.create_driver_pool(ipc=True, max_size=int(opts.max_size))
    except _ia.DriverError as exc:
        raise from_ironaccel(exc) from None
    mr._own = pool
    mr._alloc = pool.allocate
    mr._pool = pool._h
    mr._ipc = IpcState.created(pool)


multiprocessing.reduction.register(DeviceMemoryResource, _deep_reduce_device_memory_resource)


def DMR_mempool_get_access(dmr: DeviceMemoryResource, device_id: int) -> str:
    """"rw", "r" or "" : the access `device_id` has to the resource's pool."""
    loc = driver.CUmemLocation()
    loc.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    loc.id = int(device_id)
    flags = int(call("cuMemPoolGetAccess", dmr._pool, loc))
    return {3: "rw", 1: "r"}.get(flags, "")
