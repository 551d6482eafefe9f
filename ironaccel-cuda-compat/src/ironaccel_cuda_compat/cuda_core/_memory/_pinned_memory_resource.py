"""cuda.core's `PinnedMemoryResource`: page-locked host memory from a host memory pool (ironaccel `DriverPool`).

Without options it uses the driver's current host pool (opened read-write to the
current device if it is not yet); with options it creates
a pool of its own (`DriverPool.create(dev, "host")`), on host NUMA node `numa_id`
when one is given or IPC is enabled (then the current device's `host_numa_id`).
Buffers are usable from the host and from the device the resource was made on.
"""

from __future__ import annotations

import multiprocessing.reduction
from dataclasses import dataclass
from typing import Any

from ironaccel_cuda.driver_pool import DriverPool

from .. import _ia
from .._utils.cuda_utils import check_or_create_options, from_ironaccel
from ._ipc import _deep_reduce_pinned_memory_resource
from ._memory_pool import _MemPool

__all__ = ["PinnedMemoryResource", "PinnedMemoryResourceOptions"]


@dataclass
class PinnedMemoryResourceOptions:
    """Options for a host pool of the resource's own: IPC, a cap in bytes, the host NUMA node."""

    ipc_enabled: bool = False
    max_size: int = 0
    numa_id: int | None = None


class PinnedMemoryResource(_MemPool):
    """Stream-ordered page-locked host memory from a host memory pool."""

    __slots__ = ("_numa_id",)

    def __init__(self, options: Any = None) -> None:
        from .. import _device

        opts = check_or_create_options(PinnedMemoryResourceOptions, options, "PinnedMemoryResource options",
                                       keep_none=True)
        dev = _device.Device()
        if opts is None:
            try:
                dpool = DriverPool.current(dev, "host")
                if dpool.access(dev) != "readwrite":  # the host's pool is the CPU's until a device is let in
                    dpool.grant_access(dev)
            except _ia.DriverError as exc:
                raise from_ironaccel(exc) from None
            self._bind_pool(dev, dpool, owned=False)
            self._numa_id = -1
            return
        numa = opts.numa_id
        if numa is not None and (isinstance(numa, bool) or not isinstance(numa, int)):
            raise TypeError(f"numa_id must be an int or None, got {numa!r}")
        if numa is not None and numa < 0:
            raise ValueError(f"numa_id must be >= 0, got {numa}")
        ipc = bool(opts.ipc_enabled)
        if numa is None and ipc:
            numa = int(dev.properties.host_numa_id)
            if numa < 0:
                raise RuntimeError("Cannot determine host NUMA ID for an IPC-enabled PinnedMemoryResource: the "
                                   "current device reports none; pass numa_id=")
        try:
            dpool = DriverPool.create(dev, "host", ipc=ipc, max_size=opts.max_size,
                                      location=None if numa is None else ("host_numa", numa))
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        self._bind_pool(dev, dpool, owned=True, ipc=ipc)
        self._numa_id = -1 if numa is None else numa

    @property
    def device_id(self) -> int:
        """-1: pinned memory is not bound to a GPU."""
        return -1

    @property
    def numa_id(self) -> int:
        """The host NUMA node the pool's memory is on (-1: the OS places it)."""
        return self._numa_id

    @property
    def is_device_accessible(self) -> bool:
        return True

    @property
    def is_host_accessible(self) -> bool:
        return True

    # -- IPC: the methods are _ipc.IpcResource's (through _MemPool) ----------------------

    @classmethod
    def from_allocation_handle(cls, alloc_handle: Any) -> PinnedMemoryResource:
        """Map another process's IPC-enabled pinned resource here (it imports buffers, never allocates)."""
        return cls._map(None, alloc_handle)  # type: ignore[no-any-return]

    def _bind_mapped(self, dev: Any, state: Any) -> None:
        _MemPool._bind_mapped(self, dev, state)
        self._numa_id = -1

    def __reduce__(self) -> tuple[Any, ...]:
        if self._ipc is not None:
            return (PinnedMemoryResource.from_registry, (self.uuid,))
        raise TypeError("a PinnedMemoryResource without IPC cannot be pickled")

    def __repr__(self) -> str:
        return f"<PinnedMemoryResource numa_id={self._numa_id}{' ipc' if self._ipc else ''}>"


multiprocessing.reduction.register(PinnedMemoryResource, _deep_reduce_pinned_memory_resource)
