"""DriverPool: the driver's stream-ordered memory pools (cuMemPool*) as objects.

    pool = dev.default_pool                          # the device's default pool (what Device.alloc draws from)
    pool = dev.create_driver_pool(max_size=8 << 30)  # a pool of its own: device memory, or host=True, ipc=True,
                                                     # or managed=True (location=: its preferred location)
    buf = pool.allocate(1 << 20, "float32", stream=s)    # a DeviceBuf (cuMemAllocFromPoolAsync)
    pool.release_threshold = 0; pool.usage(); pool.trim(); pool.grant_access(peer)

Two pools, two jobs.  A `DriverPool` is the driver's own allocator: it
suballocates, reuses memory across streams by following events, can be
exported to other processes (`ipc.export`), opened to peer devices, hold
page-locked host memory, and keeps freed memory up to its release threshold.
`MemPool` (pool.py) is ironaccel's bucket cache in front of the default pool,
per stream: its warm path makes no driver call at all, but it knows nothing of
other streams, processes or devices.

Release threshold.  The driver's default is 0: every synchronize gives freed
memory back to the OS and the next allocation maps it again.  At the first
open of each device in a process, ironaccel raises the default pool's
threshold to 2**64-1 (as the Rust project cudarc does), so freed memory stays
in the pool; it never lowers a threshold that is already higher.  The
environment variable `IRONACCEL_CUDA_POOL_RELEASE_THRESHOLD` chooses
otherwise: `max` (the default), `keep` (leave the driver's value), or a byte
count (`0`, `8589934592`, `8GiB`).  At any time `dev.default_pool.release_threshold = n`
sets it; `trim()` gives unused memory back now.  The default pool is shared
by every library in the process (PyTorch's and CuPy's stream-ordered
allocators draw from it too).  Created pools start at the driver's 0 unless
`release_threshold=` is given.

Locations.  A host pool may be placed on a NUMA node (`location=("host_numa", n)`),
which the driver needs before such a pool can be exported; a managed pool
(`managed=True`, CUDA 13) may name a preferred location (`("device", ordinal)`,
`("host", 0)`, `("host_numa", n)`) or none.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from . import _core, _driver
from ._devices import ENV_RELEASE_THRESHOLD, MAX_THRESHOLD, DeviceState, attribute, parse_threshold, state_of
from ._driver import call, driver
from .allocator import _Tracked, check_stream, deallocate, element_count, host_ranges
from .errors import InvalidState, Unsupported, closed, invalid
from .memory import adopt

if TYPE_CHECKING:
    from .device import Device
    from .stream import Stream

    DeviceBuf = Any  # memory.DeviceBuf is made at run time, so it cannot be a static type

__all__ = ["DriverPool", "PoolUsage", "ENV_RELEASE_THRESHOLD", "parse_threshold"]

_ACCESS = {"none": 0, "read": 1, "readwrite": 3}
_ACCESS_NAMES = {v: k for k, v in _ACCESS.items()}


@dataclass(frozen=True)
class PoolUsage:
    """Bytes of a driver pool: in use by allocations now and at most, reserved from the OS now and at most."""

    used: int
    used_high: int
    reserved: int
    reserved_high: int

    def to_dict(self) -> dict[str, int]:
        """The byte counts as a plain dict (JSON-ready, for reports)."""
        return asdict(self)


def memory_location(drv: Any, kind: str, ordinal: int) -> Any:
    """A CUmemLocation: the host ("host"), device `ordinal` ("device"), host NUMA node `ordinal` ("host_numa"),
    the calling thread's NUMA node ("host_numa_current") or none ("none")."""
    loc = drv.CUmemLocation()
    types = drv.CUmemLocationType
    if kind == "host":
        loc.type = types.CU_MEM_LOCATION_TYPE_HOST
        loc.id = 0
    elif kind == "host_numa":
        loc.type = types.CU_MEM_LOCATION_TYPE_HOST_NUMA
        loc.id = ordinal
    elif kind == "host_numa_current":
        loc.type = types.CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT
        loc.id = 0
    elif kind == "none":  # cuda.bindings before 13.x names it only CU_MEM_LOCATION_TYPE_INVALID (both 0)
        loc.type = getattr(types, "CU_MEM_LOCATION_TYPE_NONE", types.CU_MEM_LOCATION_TYPE_INVALID)
        loc.id = 0
    else:
        loc.type = types.CU_MEM_LOCATION_TYPE_DEVICE
        loc.id = ordinal
    return loc


def _access_desc(drv: Any, ordinal: int, flags: int) -> Any:
    desc = drv.CUmemAccessDesc()
    desc.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    desc.location.id = ordinal
    desc.flags = drv.CUmemAccess_flags(flags)
    return desc


def peer_device(peer: Any, op: str) -> DeviceState:
    """The state of the device a `peer` argument names (an open Device or an ordinal); typed errors otherwise."""
    return state_of(peer, op, "peer")


def device_attribute(device: Device, name: str) -> int:
    """cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_<name>) of `device`; 0 when the binding lacks the attribute."""
    return attribute(device._state.cudev, name)


# This process's IPC-capable created pools, as weak references: ipc.export() walks a tuple of them (a WeakSet's
# guarded iteration was a sizeable share of an export's cost).
ipc_pools: list[weakref.ref[Any]] = []
_ipc_pools_lock = threading.Lock()


def _register_ipc(pool: DriverPool) -> None:
    """A pool created with ipc=True: its buffers can then be exported (`ipc.export`)."""
    with _ipc_pools_lock:
        ipc_pools[:] = [r for r in ipc_pools if r() is not None]
        ipc_pools.append(weakref.ref(pool))


class DriverPool(_Tracked):
    """A driver memory pool (CUmemoryPool); see the module docstring.  Satisfies `allocator.Allocator`.

    `kind` is "device" or "host" (page-locked host memory the device can
    use); `ipc` says it can be exported (`ipc.export`); `imported` pools
    (opened from another process's descriptor) only hold imported buffers.
    `outstanding()` counts a created pool's allocations (0 for the default pool).
    """

    device: Device
    kind: str
    ipc: bool
    imported: bool
    max_size: int
    _h: Any
    _owned: bool
    _closed: bool
    _exported: Any  # the pool's shareable handle (ipc.IpcPool), made on first export
    _export_data: dict[int, bytes]  # base -> its cuMemPoolExportPointer data, kept while the allocation lives
    _closer: Any  # what close() does instead of cuMemPoolDestroy (an imported pool's release)
    _frees_queued: bool  # a buffer was freed (stream-ordered) since the pool was made

    def __init__(self) -> None:
        raise TypeError("use Device.default_pool or Device.create_driver_pool()")

    @classmethod
    def _make(cls, handle: Any, device: Device, *, owned: bool, kind: str = "device", ipc: bool = False,
              imported: bool = False, max_size: int = 0) -> DriverPool:
        pool = cls.__new__(cls)
        pool._h = handle
        pool.device = device
        pool.kind = kind
        pool.ipc = ipc
        pool.imported = imported
        pool.max_size = max_size
        pool._owned = owned
        pool._closed = False
        _Tracked.__init__(pool)
        pool._exported = None
        pool._export_data = {}
        pool._closer = None
        pool._frees_queued = False
        return pool

    # -- creation ------------------------------------------------------------

    @classmethod
    def _create(cls, device: Device, *, host: bool, ipc: bool, max_size: int, release_threshold: int | None,
                managed: bool = False, location: tuple[str, int] | None = None) -> DriverPool:
        for name, value in (("host", host), ("managed", managed)):
            if not isinstance(value, bool):
                raise invalid("cuMemPoolCreate", f"{name} must be a bool, got {value!r}")
        if host and managed:
            raise invalid("cuMemPoolCreate", "a pool holds host or managed memory, not both")
        return cls.create(device, "host" if host else "managed" if managed else "device", ipc=ipc,
                          max_size=max_size, release_threshold=release_threshold, location=location)

    @classmethod
    def create(cls, device: Device, kind: str = "device", *, ipc: bool = False, max_size: int = 0,
               release_threshold: int | None = None, location: tuple[str, int] | None = None) -> DriverPool:
        """A pool of its own (cuMemPoolCreate) of `kind` "device", "host" (page-locked) or "managed".

        `location` places it: for "host", ("host_numa", node) puts the memory on
        that NUMA node (needed for `ipc`); for "managed", the preferred location
        ("device", ordinal), ("host", 0), ("host_numa", node) or None (none).
        A host pool is opened read-write to `device`.  Unlike
        `Device.create_driver_pool`'s, the pool is not the Device handle's to
        close: close it, or let it be collected.
        """
        op = "cuMemPoolCreate"
        if not device.attributes.memory_pools_supported:
            raise Unsupported("cuda", op, f"cuda:{device.ordinal} has no stream-ordered memory pools")
        if kind not in ("device", "host", "managed"):
            raise invalid(op, f"kind must be 'device', 'host' or 'managed', got {kind!r}")
        if not isinstance(ipc, bool):
            raise invalid(op, f"ipc must be a bool, got {ipc!r}")
        if isinstance(max_size, bool) or not isinstance(max_size, int) or not 0 <= max_size < 1 << 64:
            raise invalid(op, f"max_size must be a non-negative int (bytes; 0: no limit), got {max_size!r}")
        if location is not None and not (
                isinstance(location, tuple) and len(location) == 2 and location[0] in ("device", "host", "host_numa")
                and isinstance(location[1], int) and not isinstance(location[1], bool) and location[1] >= 0):
            raise invalid(op, f"location must be ('device', ordinal), ('host', 0) or ('host_numa', node), "
                          f"got {location!r}")
        host = kind == "host"
        numa = location is not None and location[0] == "host_numa"
        if kind == "managed" and ipc:
            raise invalid(op, "managed-memory pools cannot be exported")
        if host and ipc and not numa:
            raise invalid(op, "a host-memory pool can be exported only when placed on a NUMA node "
                          "(location=('host_numa', node))")
        if location is not None and (kind == "device" or (host and not numa)):
            raise invalid(op, f"a {kind} pool takes no location other than ('host_numa', node), got {location!r}")
        if host and not device_attribute(device, "HOST_NUMA_MEMORY_POOLS_SUPPORTED" if numa
                                         else "HOST_MEMORY_POOLS_SUPPORTED"):
            raise Unsupported("cuda", op, f"the driver has no host-memory pools for cuda:{device.ordinal}")
        if kind == "managed" and not device.attributes.concurrent_managed_access:
            raise Unsupported("cuda", op, f"cuda:{device.ordinal} has no concurrent managed access for managed pools")
        if ipc and not device_attribute(device, "MEMPOOL_SUPPORTED_HANDLE_TYPES") & 1:
            raise Unsupported("cuda", op, f"cuda:{device.ordinal}'s pools cannot be exported as file descriptors")
        drv = driver()
        props = drv.CUmemPoolProps()
        props.allocType = (drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_MANAGED if kind == "managed"
                           else drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED)
        props.handleTypes = drv.CUmemAllocationHandleType(1 if ipc else 0)
        if kind == "managed":
            props.location = memory_location(drv, *(location or ("none", 0)))
        elif numa:
            props.location = memory_location(drv, "host_numa", location[1])  # type: ignore[index]
        else:
            props.location = memory_location(drv, kind, device.ordinal)
        props.maxSize = max_size
        device._bind_here()
        h = call(op, props)
        pool = cls._make(h, device, owned=True, kind=kind, ipc=ipc, max_size=max_size)
        if ipc:
            _register_ipc(pool)
        try:
            if host:  # a host pool is the CPU's until a device is given access
                call("cuMemPoolSetAccess", h, [_access_desc(drv, device.ordinal, 3)], 1)
            if release_threshold is not None:
                pool.release_threshold = release_threshold
        except BaseException:
            pool.close()
            raise
        return pool

    @classmethod
    def current(cls, device: Device, kind: str = "device") -> DriverPool:
        """The driver's current pool (cuMemGetMemPool) for `device`'s memory ("device"), the host's page-locked
        memory ("host") or managed memory with no preferred location ("managed"); never destroyed."""
        op = "cuMemGetMemPool"
        drv = driver()
        if kind == "device":
            return cls._make(call("cuDeviceGetMemPool", device._state.cudev), device, owned=False)
        types = {"host": ("host", drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED),
                 "managed": ("none", drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_MANAGED)}
        if not isinstance(kind, str) or kind not in types:
            raise invalid(op, f"kind must be 'device', 'host' or 'managed', got {kind!r}")
        where, alloc_type = types[kind]
        device._bind_here()
        h = call(op, memory_location(drv, where, 0), alloc_type)
        return cls._make(h, device, owned=False, kind=kind)

    @classmethod
    def _default(cls, device: Device) -> DriverPool:
        return cls._make(call("cuDeviceGetDefaultMemPool", device._state.cudev), device, owned=False)

    # -- the allocator protocol -------------------------------------------------

    def allocate(self, size: int, dtype: Any = "uint8", stream: Stream | None = None) -> DeviceBuf:
        """`size` elements of `dtype` from this pool, stream-ordered on `stream` (default: the default stream)."""
        if not self._owned and not self.imported and self.kind == "device":
            self._check_open("cuMemAllocAsync")
            return self.device.alloc(size, dtype, stream)
        op = "cuMemAllocFromPoolAsync"
        self._check_open(op)
        if self.imported:
            raise InvalidState("cuda", op, detail="an imported pool holds buffers of another process; it cannot "
                               "allocate")

        most = 1 << 46 if self.kind != "device" else self.device.total_memory
        dt, size, nbytes = element_count(self.device, size, dtype, op, most)
        s = check_stream(self.device, stream, op)
        self.device._bind_here()
        ptr = int(call(op, nbytes, self._h, s._h))
        self._add(ptr, nbytes)
        if self.kind != "device":
            host_ranges.add(ptr, nbytes, "host pool" if self.kind == "host" else "managed")
        return adopt(ptr, size, dt, self.device, stream=s, release=_Free(self, ptr, s))

    def deallocate(self, buf: DeviceBuf, stream: Stream | None = None) -> None:
        """Free `buf` stream-ordered on `stream` (default: its home stream); see `allocator.deallocate`."""
        if self._owned or self.imported:
            deallocate(self, buf, stream, "DriverPool.deallocate", owned=self._owns(buf))
        else:
            deallocate(self, buf, stream, "DriverPool.deallocate")

    def _drop(self, ptr: int) -> None:
        with self._lock:
            self._live.pop(ptr, None)
            self._export_data.pop(ptr, None)  # a later allocation at this address exports its own data

    def _release(self, ptr: int, stream: Stream) -> None:
        self._drop(ptr)
        self._frees_queued = True
        if self.kind != "device":
            host_ranges.remove(ptr)
        h = stream._h
        if h is _core.CLOSED:
            h = self.device._state.default_stream._h
        _core.mem_free_async(int(ptr), h)
        if self._closed and self._owned and not self._closer and not self._live and not _driver.forked:
            _core.stream_sync(h)  # the pool was closed with this buffer outstanding: destroy it now
            self._destroy()

    def _owner_of(self, ptr: int) -> tuple[int, int] | None:
        """(base, bytes) of this pool's outstanding allocation holding address `ptr`, if any."""
        with self._lock:
            nbytes = self._live.get(ptr)
            if nbytes is not None:  # the whole allocation: the usual case
                return ptr, nbytes
            for base, nbytes in self._live.items():
                if base <= ptr < base + nbytes:
                    return base, nbytes
        return None

    # -- attributes ---------------------------------------------------------------

    def _get(self, name: str) -> int:
        op = "cuMemPoolGetAttribute"
        self._check_open(op)
        attr = getattr(driver().CUmemPool_attribute, "CU_MEMPOOL_ATTR_" + name)
        return int(call(op, self._h, attr))

    def _set(self, name: str, value: Any) -> None:
        op = "cuMemPoolSetAttribute"
        self._check_open(op)
        attr = getattr(driver().CUmemPool_attribute, "CU_MEMPOOL_ATTR_" + name)
        call(op, self._h, attr, value)

    @property
    def release_threshold(self) -> int:
        """Bytes of freed memory the pool keeps before a synchronize gives the rest back to the OS."""
        return self._get("RELEASE_THRESHOLD")

    @release_threshold.setter
    def release_threshold(self, nbytes: int) -> None:
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 0 <= nbytes <= MAX_THRESHOLD:
            raise invalid("cuMemPoolSetAttribute", f"release_threshold must be an int in [0, 2**64-1], got {nbytes!r}")
        self._set("RELEASE_THRESHOLD", driver().cuuint64_t(nbytes))

    def _flag(self, name: str) -> bool:
        return bool(self._get(name))

    def _set_flag(self, name: str, on: bool) -> None:
        if not isinstance(on, bool):
            raise invalid("cuMemPoolSetAttribute", f"{name.lower()} must be a bool, got {on!r}")
        self._set(name, int(on))

    @property
    def reuse_follow_event_dependencies(self) -> bool:
        """Reuse memory freed on another stream once an event orders this stream after the free."""
        return self._flag("REUSE_FOLLOW_EVENT_DEPENDENCIES")

    @reuse_follow_event_dependencies.setter
    def reuse_follow_event_dependencies(self, on: bool) -> None:
        self._set_flag("REUSE_FOLLOW_EVENT_DEPENDENCIES", on)

    @property
    def reuse_allow_opportunistic(self) -> bool:
        """Reuse memory whose free has completed, with no dependency between the streams."""
        return self._flag("REUSE_ALLOW_OPPORTUNISTIC")

    @reuse_allow_opportunistic.setter
    def reuse_allow_opportunistic(self, on: bool) -> None:
        self._set_flag("REUSE_ALLOW_OPPORTUNISTIC", on)

    @property
    def reuse_allow_internal_dependencies(self) -> bool:
        """Let the driver insert stream dependencies to reuse memory freed on another stream."""
        return self._flag("REUSE_ALLOW_INTERNAL_DEPENDENCIES")

    @reuse_allow_internal_dependencies.setter
    def reuse_allow_internal_dependencies(self, on: bool) -> None:
        self._set_flag("REUSE_ALLOW_INTERNAL_DEPENDENCIES", on)

    def usage(self) -> PoolUsage:
        """Bytes used by allocations and reserved from the OS, now and at their high-water marks."""
        return PoolUsage(self._get("USED_MEM_CURRENT"), self._get("USED_MEM_HIGH"),
                         self._get("RESERVED_MEM_CURRENT"), self._get("RESERVED_MEM_HIGH"))

    def reset_high_water(self) -> None:
        """Restart both high-water marks from the current values."""
        zero = driver().cuuint64_t(0)
        self._set("USED_MEM_HIGH", zero)
        self._set("RESERVED_MEM_HIGH", zero)

    def trim(self, keep: int = 0) -> None:
        """Give unused reserved memory back to the OS until at most `keep` bytes stay reserved."""
        op = "cuMemPoolTrimTo"
        self._check_open(op)
        if isinstance(keep, bool) or not isinstance(keep, int) or not 0 <= keep < 1 << 64:
            raise invalid(op, f"keep must be a non-negative int (bytes) below 2**64, got {keep!r}")
        call(op, self._h, keep)

    # -- peers --------------------------------------------------------------------

    def grant_access(self, peer: Device | int, access: str = "readwrite") -> None:
        """Let kernels and copies on device `peer` use this pool's memory ("read", "readwrite" or "none")."""
        op = "cuMemPoolSetAccess"
        self._check_open(op)
        other = peer_device(peer, op)
        if not isinstance(access, str) or access not in _ACCESS:
            raise invalid(op, f"access must be one of {sorted(_ACCESS)}, got {access!r}")
        if self.kind == "device" and other.ordinal == self.device.ordinal:
            if access != "readwrite":
                raise invalid(op, f"a pool of cuda:{other.ordinal} is always read-write for that device")
            return
        if self.kind == "device" and not other.can_access(self.device._state):
            raise invalid(op, f"cuda:{other.ordinal} cannot access cuda:{self.device.ordinal} (no peer path)")
        call(op, self._h, [_access_desc(driver(), other.ordinal, _ACCESS[access])], 1)

    def access(self, peer: Device | int) -> str:
        """How device `peer` may use this pool's memory: "none", "read" or "readwrite"."""
        op = "cuMemPoolGetAccess"
        self._check_open(op)
        other = peer_device(peer, op)
        loc = memory_location(driver(), "device", other.ordinal)
        return _ACCESS_NAMES.get(int(call(op, self._h, loc)), "none")

    # -- identity and lifetime ---------------------------------------------------------

    @property
    def handle(self) -> int:
        """The CUmemoryPool address."""
        self._check_open("DriverPool.handle")
        return int(self._h)

    @property
    def closed(self) -> bool:
        """Whether `close()` destroyed this pool (later calls on it raise ClosedError)."""
        return self._closed

    def close(self) -> None:
        """Destroy the pool (cuMemPoolDestroy).  Idempotent; the default pool is never destroyed.

        Outstanding buffers stay valid: the pool is destroyed when the last of them is freed.
        """
        if self._closed or not self._owned:
            return
        self._closed = True
        exported, self._exported = self._exported, None
        if exported is not None:
            exported._close_fd()
        if self._closer is not None:
            self._closer()
        elif not _driver.forked:
            with self._lock:
                outstanding = bool(self._live)
            if not outstanding:
                if self._frees_queued:  # frees may still be queued on streams: the pool goes after them
                    self.device._bind_here()
                    call("cuCtxSynchronize")
                self._destroy()

    def _destroy(self) -> None:
        # A pool destroyed with allocations outstanding (which the driver documents as allowed: it frees the pool
        # with its last allocation) made a later cuStreamSynchronize crash inside libcuda 580.159
        # (test_closed_pools_and_surviving_buffers then test_graph): the last free destroys it instead.
        call("cuMemPoolDestroy", self._h)

    def __enter__(self) -> DriverPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_owned", False) and not getattr(self, "_closed", True):
            try:
                self.close()
            except Exception:
                pass

    def __repr__(self) -> str:
        what = "default" if not self._owned and not self.imported else ("imported" if self.imported else self.kind)
        state = " closed" if self._closed else ""
        return f"<DriverPool {what}{' ipc' if self.ipc else ''} for cuda:{self.device.ordinal}{state}>"

    def _check_open(self, op: str) -> None:
        if self._closed:
            raise closed(op, "driver pool")
        self.device._check_open(op)


class _Free:
    """The release of one allocation from a created pool: back to the pool, on the buffer's home stream."""

    __slots__ = ("pool", "ptr", "stream")

    def __init__(self, pool: DriverPool, ptr: int, stream: Stream):
        self.pool, self.ptr, self.stream = pool, ptr, stream

    def __call__(self) -> None:
        self.pool._release(self.ptr, self.stream)
