"""cuda.core's `DeviceMemoryResource` over a device memory pool (ironaccel `DriverPool`).

Without options it uses the device's current pool: `allocate(size, stream=s)` is
ironaccel's `Device.alloc` (cuMemAllocAsync, the compiled hot path) and
`Buffer.close(s)` its stream-ordered free.  As cuda.core does, the pool's release
threshold is raised to the maximum the first time, so freed memory stays cached in
the pool, unless `IRONACCEL_CUDA_POOL_RELEASE_THRESHOLD` is set: a user's explicit
setting wins.  With `DeviceMemoryResourceOptions` it creates a pool of its own
(`DriverPool.create`; see `_memory_pool`).
"""

from __future__ import annotations

import multiprocessing.reduction
import os
from dataclasses import dataclass
from typing import Any

from ironaccel_cuda.driver_pool import ENV_RELEASE_THRESHOLD, DriverPool

from .. import _ia
from .._stream import Stream, Stream_accept, for_device
from .._utils.cuda_utils import call, check_or_create_options, driver, from_ironaccel, guarded
from ._buffer import Buffer
from ._ipc import _deep_reduce_device_memory_resource
from ._memory_pool import _MemPool

__all__ = ["DeviceMemoryResource", "DeviceMemoryResourceOptions"]

_MAX_THRESHOLD = 0xFFFFFFFFFFFFFFFF


@dataclass
class DeviceMemoryResourceOptions:
    """Options for a pool of the resource's own: exportable to other processes (`ipc_enabled`), capped (`max_size`)."""

    ipc_enabled: bool = False
    max_size: int = 0


class DeviceMemoryResource(_MemPool):
    """Stream-ordered device memory from the device's current memory pool, or from a pool of its own (options)."""

    __slots__ = ("_alloc",)

    def __init__(self, device_id: Any, options: Any = None) -> None:
        from .._device import Device

        dev = Device(device_id)
        if options is not None:
            opts = check_or_create_options(DeviceMemoryResourceOptions, options, "DeviceMemoryResource options")
            try:
                dpool = DriverPool.create(dev, "device", ipc=bool(opts.ipc_enabled), max_size=opts.max_size)
            except _ia.DriverError as exc:
                raise from_ironaccel(exc) from None
            self._bind_pool(dev, dpool, owned=True, ipc=bool(opts.ipc_enabled))
            self._alloc = None
            return
        self._bind_pool(dev, DriverPool.current(dev, "device"), owned=False)
        self._alloc = dev.alloc
        if ENV_RELEASE_THRESHOLD in os.environ:
            return
        dpool = self._dpool
        try:
            threshold = dpool.release_threshold
        except _ia.DriverError as exc:  # a driver that does not say: left as it is
            if exc.code is None:
                raise
            return
        if threshold == 0:
            guarded(setattr, dpool, "release_threshold", _MAX_THRESHOLD)

    # `size` bytes on the device, stream-ordered on `stream`: compiled for the device's pool and an open Stream of
    # its device (`_core.compat_dmr_allocate`), else `_allocate_cold`.
    allocate = _ia.compat_dmr_allocate

    def _allocate_cold(self, size: int, stream: Any) -> Buffer:
        """allocate(): ironaccel's Device.alloc or DriverPool.allocate."""
        alloc = self._alloc
        if alloc is None:
            return _MemPool.allocate(self, size, stream=stream)
        s = stream if stream.__class__ is Stream else _not_capturing(Stream_accept(stream))
        if s._ordinal != self._ordinal:
            s = for_device(s, self._ordinal)
        if self._closed:
            raise RuntimeError("the memory resource is closed")
        if not size:
            return Buffer._init(0, size, self, stream=s)
        try:
            mem = alloc(size, "uint8", s)
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        return Buffer._adopt(mem, size, self, s)

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
        """The other devices with read-write access to the pool (read from the driver each time)."""
        from .._device import Device

        return _Devices(Device(i) for i in range(_ia.device_count())
                        if i != self._ordinal and DMR_mempool_get_access(self, i) == "rw")

    @peer_accessible_by.setter
    def peer_accessible_by(self, devices: Any) -> None:
        from .._device import Device

        if self._closed:
            raise RuntimeError("the memory resource is closed")
        wanted = set()
        for d in devices:
            ordinal = d.device_id if isinstance(d, Device) else d
            if isinstance(ordinal, bool) or not isinstance(ordinal, int):
                raise TypeError(f"peer_accessible_by takes Devices or device ordinals, got {d!r}")
            if not 0 <= ordinal < _ia.device_count():
                raise ValueError(f"device ordinal {ordinal} is out of range")
            if ordinal != self._ordinal:
                wanted.add(ordinal)
        have = {d.device_id for d in self.peer_accessible_by}
        try:
            for ordinal in sorted(have - wanted):
                self._dpool.grant_access(ordinal, "none")
            for ordinal in sorted(wanted - have):
                self._dpool.grant_access(ordinal, "readwrite")
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None

    # -- IPC: the methods are _ipc.IpcResource's (through _MemPool) ----------------------

    @classmethod
    def from_allocation_handle(cls, device_id: Any, alloc_handle: Any) -> DeviceMemoryResource:
        """Map another process's IPC-enabled resource here (a mapped resource: it imports buffers, never allocates)."""
        return cls._map(device_id, alloc_handle)  # type: ignore[no-any-return]

    def _bind_mapped(self, dev: Any, state: Any) -> None:
        _MemPool._bind_mapped(self, dev, state)
        self._alloc = None

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
    if guarded(lambda: s.is_capturing):
        raise RuntimeError("DeviceMemoryResource cannot perform memory operations on a capturing stream (consider "
                           "using GraphMemoryResource).")
    return s


multiprocessing.reduction.register(DeviceMemoryResource, _deep_reduce_device_memory_resource)


def DMR_mempool_get_access(dmr: DeviceMemoryResource, device_id: int) -> str:
    """"rw", "r" or "" : the access `device_id` has to the resource's pool."""
    loc = driver.CUmemLocation()
    loc.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    loc.id = int(device_id)
    flags = int(call("cuMemPoolGetAccess", dmr._pool, loc))
    return {3: "rw", 1: "r"}.get(flags, "")


_ia.set_compat_buffer(Buffer, DeviceMemoryResource, Stream, _ia.PinnedBuf, from_ironaccel)
