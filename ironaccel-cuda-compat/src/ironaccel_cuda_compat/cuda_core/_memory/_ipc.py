"""cuda.core's IPC of memory pools: `IPCAllocationHandle`, `IPCBufferDescriptor`, the registry of mapped resources.

An IPC-enabled `DeviceMemoryResource` is an ironaccel `DriverPool(ipc=True)`; its
`allocation_handle` is the pool's POSIX file descriptor (`ipc.export(pool)`), duplicated
into an `IPCAllocationHandle` that owns it.  In another process
`DeviceMemoryResource.from_allocation_handle` imports the pool through ironaccel's
`IpcPool.open` (a "mapped" resource, kept in a per-process registry by the exporter's
UUID), and `Buffer.from_ipc_descriptor` maps a buffer through `IpcBuffer.open`, so a
pointer imported twice is unmapped once, after its last Buffer closes.

Pickling follows cuda.core: with `multiprocessing` (queues, pipes, Process arguments)
a resource travels as its allocation handle (`multiprocessing.reduction.DupFd`) and is
imported on arrival; with plain `pickle` it travels as its UUID and must already be
registered in the receiving process.  Buffers travel as (resource, descriptor).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.reduction
import os
import uuid as _uuid
import weakref
from typing import Any

from ironaccel_cuda import dtypes as _ia_dtypes
from ironaccel_cuda import ipc as _ipc
from ironaccel_cuda.ipc import handle_bytes, handle_from_bytes
from ironaccel_cuda.memory import free_async

from .. import _ia

__all__: list[str] = []  # as in cuda.core 1.2: importable by name, not by *

PAYLOAD_SIZE = 64  # bytes in a CUmemPoolPtrExportData

registry: weakref.WeakValueDictionary[Any, Any] = weakref.WeakValueDictionary()


class IPCBufferDescriptor:
    """Serializable description of a buffer another process can map (the export data and the size in bytes).

    The payload and size come from the exporting peer: import only through
    `Buffer.from_ipc_descriptor`, which checks both before mapping.
    """

    __slots__ = ("_payload", "_size")
    _payload: bytes
    _size: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("IPCBufferDescriptor objects cannot be instantiated directly. Please use MemoryResource "
                           "APIs.")

    @staticmethod
    def _init(reserved: bytes, size: int) -> IPCBufferDescriptor:
        self = object.__new__(IPCBufferDescriptor)
        self._payload = bytes(reserved)
        self._size = int(size)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return IPCBufferDescriptor._init, (self._payload, self._size)

    @property
    def size(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"<IPCBufferDescriptor size={self._size}>"


class IPCAllocationHandle:
    """Shareable handle (a POSIX file descriptor this object owns) to an IPC-enabled memory pool."""

    __slots__ = ("_fd", "_uuid", "__weakref__")
    _fd: int
    _uuid: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("IPCAllocationHandle objects cannot be instantiated directly. Please use MemoryResource "
                           "APIs.")

    @classmethod
    def _init(cls, handle: int, uuid: Any) -> IPCAllocationHandle:
        if handle < 0:
            raise ValueError(f"Invalid allocation handle (fd) {handle}: must be non-negative")
        self = object.__new__(cls)
        self._fd = int(handle)
        self._uuid = uuid
        return self

    def close(self) -> None:
        """Close the file descriptor.  Idempotent."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            self.close()

    @property
    def is_closed(self) -> bool:
        """Whether this allocation handle has been closed."""
        return self._fd < 0

    def __int__(self) -> int:
        if self._fd < 0:
            raise ValueError(f"Cannot convert IPCAllocationHandle to int: the handle (id={id(self)}) is closed.")
        return self._fd

    @property
    def handle(self) -> int:
        return self._fd

    @property
    def uuid(self) -> Any:
        return self._uuid

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError("an IPCAllocationHandle holds a file descriptor: send it with multiprocessing (a Queue, a "
                        "Pipe, Process arguments) or multiprocessing.reduction.send_handle, not plain pickle")

    def __repr__(self) -> str:
        return f"<IPCAllocationHandle fd={self._fd} uuid={self._uuid}>"


def check_open(alloc_handle: IPCAllocationHandle) -> None:
    if alloc_handle._fd < 0:
        raise RuntimeError("IPCAllocationHandle has been closed")


def _reduce_allocation_handle(alloc_handle: IPCAllocationHandle) -> tuple[Any, ...]:
    check_open(alloc_handle)
    df = multiprocessing.reduction.DupFd(alloc_handle.handle)
    return _reconstruct_allocation_handle, (type(alloc_handle), df, alloc_handle.uuid)


def _reconstruct_allocation_handle(cls: type, df: Any, uuid: Any) -> IPCAllocationHandle:
    return cls._init(df.detach(), uuid)  # type: ignore[attr-defined, no-any-return]


def export_handle(fd: int) -> IPCAllocationHandle:
    """A new IPCAllocationHandle owning a duplicate of a pool's exported descriptor, under a fresh UUID."""
    dup = os.dup(fd)
    try:
        return IPCAllocationHandle._init(dup, _uuid.uuid4())
    except BaseException:
        os.close(dup)
        raise


def from_registry(uuid: Any) -> Any:
    try:
        mr = registry[uuid]
    except KeyError:
        raise RuntimeError(f"Memory resource {uuid} was not found") from None
    if mr.is_closed:
        raise RuntimeError(f"Memory resource {uuid} was not found")
    return mr


def register(mr: Any, uuid: Any) -> Any:
    existing = registry.get(uuid)
    if existing is not None and not existing.is_closed:
        return existing
    if not mr.is_ipc_enabled:
        raise RuntimeError("Memory resource is not IPC-enabled")
    registry[uuid] = mr
    return mr


class IpcState:
    """The IPC side of a pool-backed resource (`mr._ipc`): its allocation handle; a mapped one's imported pool.

    `pool` is the ironaccel DriverPool (created with ipc=True, or imported); `source` the
    ironaccel IpcPool it was imported from.
    """

    __slots__ = ("pool", "alloc_handle", "source", "mapped")

    def __init__(self, pool: Any, alloc_handle: IPCAllocationHandle, source: Any, mapped: bool):
        self.pool, self.alloc_handle, self.source, self.mapped = pool, alloc_handle, source, mapped

    @property
    def uuid(self) -> Any:
        return self.alloc_handle.uuid

    @classmethod
    def created(cls, pool: Any) -> IpcState:
        """The state of an exporting resource over `pool`, an IPC-enabled DriverPool of its own."""
        return cls(pool, export_handle(_ipc.export(pool)._fd), None, False)

    @classmethod
    def imported(cls, dev: Any, fd: int, uuid: Any) -> IpcState:
        """Import the pool behind file descriptor `fd` (not taken: duplicated, for the handle and the pool)."""
        from .._utils.cuda_utils import from_ironaccel

        alloc_handle = IPCAllocationHandle._init(os.dup(fd), uuid)
        key = str(uuid) if uuid is not None else _uuid.uuid4().hex
        source = _ipc.IpcPool._make(os.dup(fd), dev.uuid, 0, key, received=True)
        try:
            pool = source.open(dev)
        except _ia.DriverError as exc:
            source.close()
            alloc_handle.close()
            raise from_ironaccel(exc) from None
        return cls(pool, alloc_handle, source, True)

    def close(self) -> None:
        if self.mapped:
            self.pool.close()
            self.source.close()
        self.alloc_handle.close()
        self.pool = None  # an exporter's pool goes with its resource's last buffer


class ImportedFrom:
    """An imported Buffer's origin (kept in its `_owner`): so it can be sent on, even once closed."""

    __slots__ = ("mr", "descriptor")

    def __init__(self, mr: Any, descriptor: IPCBufferDescriptor):
        self.mr, self.descriptor = mr, descriptor


def export_buffer(mr: Any, buf: Any) -> IPCBufferDescriptor:
    """`buf.ipc_descriptor` for a buffer that pool-backed resource `mr` allocated."""
    from .._utils.cuda_utils import driver, from_ironaccel

    state = mr._ipc
    if state is None:
        raise RuntimeError("Memory resource is not IPC-enabled")
    if state.mapped:
        raise RuntimeError("this buffer was not imported through its memory resource")
    mem = buf._mem
    if type(mem) is _ia.DeviceBuf and buf._ptr:  # ironaccel keeps an allocation's export data (ipc.export)
        try:
            made = _ipc.export(mem)
        except _ia.DriverError:
            made = None  # the path below asks the driver and says what cuda.core says
        if made is not None and made.kind == "pool" and made.offset == 0:
            return IPCBufferDescriptor._init(made.handle, buf._size)
    try:
        data = _ia.call("cuMemPoolExportPointer", driver.CUdeviceptr(buf._ptr))
    except _ia.DriverError as exc:
        raise from_ironaccel(exc) from None
    return IPCBufferDescriptor._init(handle_bytes(data), buf._size)


def import_buffer(mr: Any, desc: IPCBufferDescriptor, stream: Any) -> Any:
    """`Buffer.from_ipc_descriptor(mr, desc)` for pool-backed resource `mr`: checks, maps, wraps in a Buffer."""
    from .._stream import Stream_accept, default_stream
    from .._utils.cuda_utils import driver, from_ironaccel
    from ._buffer import Buffer

    state = mr._ipc
    if state is None:
        raise RuntimeError("Memory resource is not IPC-enabled")
    payload = desc._payload
    if len(payload) < PAYLOAD_SIZE:
        raise ValueError(f"IPC buffer descriptor payload is {len(payload)} bytes; expected at least {PAYLOAD_SIZE}")
    payload = payload[:PAYLOAD_SIZE]
    size = desc.size
    s = Stream_accept(stream) if stream is not None else default_stream()
    dev = mr._device
    try:
        if state.mapped:
            made = _ipc.IpcBuffer._make("pool", dev.uuid, 0, size, "uint8", 0, payload, state.source)
            dt, npdt, _ = _ia_dtypes.spec("uint8", "cuMemPoolImportPointer")
            mem, extent = made._map_pool(dev, dt, npdt, "cuMemPoolImportPointer")
        else:  # the exporter itself: as cuda.core, ask the driver (it refuses its own pointers)
            data = handle_from_bytes(driver.CUmemPoolPtrExportData, payload)
            ptr = int(_ia.call("cuMemPoolImportPointer", state.pool._h, data))
            home = dev.default_stream
            mem = _ia.adopt(ptr, size, "uint8", dev, stream=home,
                            release=lambda: free_async(ptr, home))
            extent = _ipc.mapped_extent(ptr)
    except _ia.DriverError as exc:
        raise from_ironaccel(exc) from None
    if extent is not None and size > extent:
        mem.close()
        raise ValueError(f"IPC buffer descriptor size ({size}) exceeds mapped allocation extent ({extent} bytes)")
    b = Buffer._adopt(mem, size, mr, s)
    b._owner = ImportedFrom(mr, desc)
    return b


class IpcResource:
    """The IPC methods of cuda.core's pool-backed resources, over `self._ipc` (an IpcState, or None: not IPC-enabled).

    A resource class mixes this in first and provides `_device`, `_closed`, `device_id`,
    `is_closed` and `_bind_mapped(dev, state)` (fill a new instance as a mapped resource,
    whose allocate raises TypeError); its `from_allocation_handle` calls `cls._map`.
    """

    __slots__ = ()
    _ipc: IpcState | None
    _closed: bool
    _device: Any

    @property
    def is_ipc_enabled(self) -> bool:
        return self._ipc is not None

    @property
    def is_mapped(self) -> bool:
        """True for a resource mapped from another process (it imports buffers and cannot allocate)."""
        return self._ipc is not None and self._ipc.mapped

    @property
    def uuid(self) -> Any:
        """The UUID IPC-enabled resources are registered under (None when not IPC-enabled)."""
        return self._ipc.uuid if self._ipc is not None else None

    @property
    def allocation_handle(self) -> IPCAllocationHandle:
        """The shareable handle of the resource's IPC-enabled pool (the same IPCAllocationHandle each time)."""
        if self._ipc is None:
            raise RuntimeError("Memory resource is not IPC-enabled")
        _check_mr_open(self)
        return self._ipc.alloc_handle

    def get_allocation_handle(self) -> IPCAllocationHandle:
        return self.allocation_handle

    @classmethod
    def _map(cls, device_id: Any, alloc_handle: Any) -> Any:
        """The resource of `alloc_handle` mapped here: the registered one for its UUID, or a new import."""
        from .._device import Device

        if isinstance(alloc_handle, IPCAllocationHandle):
            check_open(alloc_handle)
        elif isinstance(alloc_handle, bool) or not isinstance(alloc_handle, int):
            raise TypeError(f"alloc_handle must be an IPCAllocationHandle or a file descriptor (int), got "
                            f"{type(alloc_handle).__name__}")
        uuid = getattr(alloc_handle, "uuid", None)
        mr = registry.get(uuid) if uuid is not None else None
        if mr is not None and not mr.is_closed:
            if not isinstance(mr, cls):
                raise TypeError(f"Registry contains a {type(mr).__name__} for uuid {uuid}, but {cls.__name__} was "
                                "requested")
            return mr
        dev = Device() if device_id is None or (isinstance(device_id, int) and device_id < 0) else Device(device_id)
        self = object.__new__(cls)
        self._bind_mapped(dev, IpcState.imported(dev, int(alloc_handle), uuid))  # type: ignore[attr-defined]
        if uuid is not None:
            self.register(uuid)
        return self

    @staticmethod
    def from_registry(uuid: Any) -> Any:
        """The mapped resource registered in this process under `uuid` (RuntimeError if none)."""
        return from_registry(uuid)

    def register(self, uuid: Any) -> Any:
        """Register this resource under `uuid`; returns the one already registered there, if any."""
        _check_mr_open(self)
        return register(self, uuid)

    def _import_ipc_buffer(self, ipc_descriptor: IPCBufferDescriptor, stream: Any) -> Any:
        """Buffer.from_ipc_descriptor for this resource: map the exporter's buffer here."""
        _check_mr_open(self)
        return import_buffer(self, ipc_descriptor, stream)

    def _export_ipc_buffer(self, buf: Any) -> IPCBufferDescriptor:
        """Buffer.ipc_descriptor for this resource's buffers."""
        return export_buffer(self, buf)


def _check_mr_open(mr: Any) -> None:
    if mr._closed:
        raise RuntimeError("the memory resource is closed")


def _deep_reduce_device_memory_resource(mr: Any) -> tuple[Any, ...]:
    """How multiprocessing sends a resource: an IPC-enabled one as its allocation handle, imported on arrival."""
    if mr._ipc is None:
        return mr.__reduce__()  # type: ignore[no-any-return]
    return (type(mr).from_allocation_handle, (mr.device_id, mr.get_allocation_handle()))


def _deep_reduce_pinned_memory_resource(mr: Any) -> tuple[Any, ...]:
    """As `_deep_reduce_device_memory_resource`, for PinnedMemoryResource (from_allocation_handle takes no device)."""
    if mr._ipc is None:
        return mr.__reduce__()  # type: ignore[no-any-return]
    return (type(mr).from_allocation_handle, (mr.get_allocation_handle(),))


multiprocessing.reduction.register(IPCAllocationHandle, _reduce_allocation_handle)
