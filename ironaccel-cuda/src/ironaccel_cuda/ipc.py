"""Sharing device memory and events between processes (CUDA IPC), with descriptors that pickle.

    # exporting process
    pool = dev.create_driver_pool(ipc=True)
    buf = pool.allocate(1 << 20, "float32")
    desc = cu.ipc.export(buf)                 # IpcBuffer; also cu.ipc.export(pool) -> IpcPool
    ctx = multiprocessing.get_context("spawn")
    ctx.Process(target=worker, args=(desc,)).start()    # or a Queue / Pipe, or cu.ipc.send(sock, desc)

    # importing process
    def worker(desc):
        buf = desc.open()                     # a DeviceBuf over the exporter's memory, on the device with its UUID
        ...
        buf.close()                           # unmaps here; the exporter's memory is untouched

Two kinds of buffer descriptor, chosen by where the memory came from:

* "pool": a buffer of an IPC-capable `DriverPool` (`dev.create_driver_pool(ipc=True)`).
  The descriptor carries the pool's POSIX file descriptor
  (`cuMemPoolExportToShareableHandle`) and the allocation's export data
  (`cuMemPoolExportPointer`); opening imports the pool once per process
  (`cuMemPoolImportFromShareableHandle`, kept while any of its buffers is
  open, or while `IpcPool.open()`'s pool is) and the pointer
  (`cuMemPoolImportPointer`).
* "legacy": memory from `cuMemAlloc` (`DirectAllocator`, or another library's
  caching allocator seen through `DeviceBuf.from_foreign`): a `cuIpcGetMemHandle`
  of the allocation holding the buffer, plus the buffer's offset in it.
  Stream-ordered memory of the default pool cannot be exported this way.

Events: `ipc.create_event(dev)` makes an interprocess event (timing off),
`ipc.export(event)` an `IpcEvent`, `.open()` an `Event` in the other process;
record in one process, `stream.wait(event)` or `event.synchronize()` in the other.

Raw handles: `memory_handle(ptr)` / `event_handle(event)` give the driver's legacy handles as 64 bytes, and
`open_memory_handle` / `close_memory_handle` / `open_event_handle` use them, all by address in the calling thread's
current context: for code that keeps contexts of its own and carries the bytes itself (PyCUDA's surface).

A pool buffer's descriptor carries its pool's file descriptor, so each one sent costs a file descriptor's
passage (about 0.3 ms through a pipe).  To send many buffers of one pool to a process, send the pool
(`ipc.export(pool)`) once, open it there (`IpcPool.open()`), then send `desc.without_pool()`: 64 bytes
and the pool's key, which opens only where that pool is open (cuda.core's model:
`Buffer.from_ipc_descriptor(mr, desc)`).

Descriptors pickle.  File descriptors travel the way `multiprocessing` moves
them (`reduction.DupFd`: passed to a spawned child, or through the
exporter's resource sharer for queues, pipes and plain `pickle`, which then
needs the exporter alive until the other side unpickles), or, with
`ipc.send(sock, obj)` / `ipc.recv(sock)`, directly over a Unix socket as
SCM_RIGHTS.  A descriptor names its device by UUID, so CUDA_VISIBLE_DEVICES
may differ between the processes; `open(device)` insists on that device.

Lifetime rules:

1. Closing an imported buffer (or its collection) only unmaps it in the
   importing process: a pool buffer is freed there with `cuMemFreeAsync` and
   that free has completed when `close()` returns; a legacy one is closed with
   `cuIpcCloseMemHandle`.  The exporter's memory, contents and accounting are
   untouched.
2. The exporter owns the memory.  Close the importers first (say so with a
   message, or order it with an IPC event), as the driver asks.  If the
   exporter closes a pool buffer first (or its pool, or exits), the importer's
   mapping stays backed by the same physical memory until the importer closes
   it: its reads, writes and close still succeed.  But the exporter's pool may
   hand those bytes to a new allocation, so what they hold is no longer
   defined.  For legacy handles the driver calls an exporter-first free
   undefined behaviour outright.
3. A descriptor opens only in another process (the exporter uses the buffer
   itself), as often as wanted; each `open()` is a DeviceBuf of its own.
4. An imported event must not be used after the exporter destroyed its event.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import socket
import struct
import threading
import uuid as _uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from . import _core, _driver
from . import dtypes as _dtypes
from ._devices import device_count
from ._driver import call, driver, try_call
from .allocator import release_after
from .device import Device
from .driver_pool import DriverPool, ipc_pools
from .errors import InvalidState, closed, driver_error, invalid
from .event import Event, _event_handle
from .memory import _address, adopt

if TYPE_CHECKING:
    DeviceBuf = Any  # memory.DeviceBuf is made at run time, so it cannot be a static type

__all__ = ["HANDLE_SIZE", "IpcBuffer", "IpcPool", "IpcEvent", "export", "create_event", "handle_bytes",
           "handle_from_bytes", "send", "recv", "memory_handle", "open_memory_handle", "close_memory_handle",
           "event_handle", "open_event_handle"]

CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1
CU_EVENT_DISABLE_TIMING = 0x2
CU_EVENT_INTERPROCESS = 0x4
HANDLE_SIZE = 64
_MAX_SPAN = 1 << 48  # a GPU's address space: no offset or size reaches past it
POSIX_FD = 1

_pid = os.getpid()  # this process's, kept current across forks: every open compares it


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)

_fd_slots = threading.local()  # the fds of one ipc.send / ipc.recv


def handle_bytes(handle: Any) -> bytes:
    """The HANDLE_SIZE (64) bytes of a cuda.bindings IPC handle (CUipcMemHandle, CUipcEventHandle,
    CUmemPoolPtrExportData): what a descriptor carries to the other process."""
    if not hasattr(handle, "getPtr"):
        raise invalid("ipc.handle_bytes", f"expected a cuda.bindings IPC handle, got {type(handle).__name__}")
    return ctypes.string_at(handle.getPtr(), HANDLE_SIZE)


def handle_from_bytes(cls: Any, data: bytes) -> Any:
    """A new cuda.bindings IPC handle of type `cls` (CUipcMemHandle, ...) holding the HANDLE_SIZE bytes `data`
    (from `handle_bytes` in the exporting process)."""
    if not isinstance(data, (bytes, bytearray)) or len(data) != HANDLE_SIZE:
        raise invalid("ipc.handle_from_bytes", f"expected {HANDLE_SIZE} bytes, got {data!r:.80}")
    obj = cls()
    ctypes.memmove(obj.getPtr(), bytes(data), HANDLE_SIZE)
    return obj


def _device_for(device_uuid: str, device: Any, op: str) -> Device:
    """The local device with `device_uuid`; `device`, when given, must be it."""
    if device is not None and device.__class__ is Device and device._state.uuid == device_uuid and not device.closed:
        return device  # the common case, checked in full below
    if device is not None:
        if not isinstance(device, Device):
            raise invalid(op, f"device must be a Device, got {type(device).__name__}")
        device._check_open(op)
        if device.uuid != device_uuid:
            raise invalid(op, f"the descriptor is for device {device_uuid}; cuda:{device.ordinal} is {device.uuid}")
        return device
    for ordinal in range(device_count()):
        candidate = Device(ordinal)
        if candidate.uuid == device_uuid:
            return candidate
    raise invalid(op, f"no CUDA device in this process has UUID {device_uuid} (check CUDA_VISIBLE_DEVICES)")


def _other_process(pid: int, op: str) -> None:
    if pid == _pid:
        raise invalid(op, "this process exported the descriptor; open it in another process (here, use the "
                      "buffer itself)")


# -- pools ----------------------------------------------------------------------------


class IpcPool:
    """A driver pool's shareable POSIX file descriptor, picklable; `open()` imports the pool.

    The object owns its file descriptor (the exporter's: closed with its pool;
    an importer's: closed with this object or by `close()`).
    """

    _fd: int | None
    _received: bool
    device_uuid: str
    pid: int
    key: str

    def __init__(self) -> None:
        raise TypeError("use ipc.export(pool)")

    @classmethod
    def _make(cls, fd: int, device_uuid: str, pid: int, key: str, *, received: bool = False) -> IpcPool:
        p = cls.__new__(cls)
        p._fd = fd
        p._received = received  # a copy unpickled here: this object closes its fd
        p.device_uuid = device_uuid
        p.pid = pid
        p.key = key
        return p

    def __reduce__(self) -> Any:
        if self._fd is None:
            raise closed("IpcPool.__reduce__", "pool descriptor")
        slots = getattr(_fd_slots, "out", None)
        if slots is not None:
            slots.append(self._fd)
            carried: Any = ("slot", len(slots) - 1)
        else:
            from multiprocessing import reduction

            carried = reduction.DupFd(self._fd)
        return (_rebuild_pool, (carried, self.device_uuid, self.pid, self.key))

    def open(self, device: Device | None = None) -> DriverPool:
        """Import the pool (an imported DriverPool: it holds imported buffers and cannot allocate)."""
        op = "cuMemPoolImportFromShareableHandle"
        if self._fd is None:
            raise closed(op, "pool descriptor")
        _other_process(self.pid, op)
        dev = _device_for(self.device_uuid, device, op)
        return _imports.open_pool(self, dev)

    def close(self) -> None:
        """Close this descriptor's file descriptor.  Idempotent; imported pools and buffers stay."""
        self._close_fd()

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        if getattr(self, "_received", False):
            self._close_fd()

    def __repr__(self) -> str:
        return f"<IpcPool {self.key[:8]} of pid {self.pid} on {self.device_uuid}>"


def _rebuild_pool(carried: Any, device_uuid: str, pid: int, key: str) -> IpcPool:
    if isinstance(carried, tuple):
        fds = getattr(_fd_slots, "incoming", None)
        if fds is None:
            raise InvalidState("cuda", "IpcPool", detail="this descriptor was sent with ipc.send; receive it with "
                               "ipc.recv")
        fd = fds[carried[1]]
        fds[carried[1]] = -1
    else:
        fd = carried.detach()
    return IpcPool._make(fd, device_uuid, pid, key, received=True)


def mapped_extent(ptr: int) -> int | None:
    """Bytes from `ptr` to the end of its mapped allocation, or None if the driver names no range holding it.

    The least the driver reports: cuMemGetAddressRange, and the pointer's range start and size attributes (pinned
    host pool memory reports its range with no start), counting only a range that holds `ptr` (an imported
    pinned pointer's address range came back as (0, 64) in a child process)."""
    attr = driver().CUpointer_attribute
    extents = []
    err, got = try_call("cuMemGetAddressRange", ptr)
    if not err:
        extents.append((int(got[0]), int(got[1])))
    err, start = try_call("cuPointerGetAttribute", attr.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr)
    err2, span = try_call("cuPointerGetAttribute", attr.CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr)
    if not err2:
        extents.append((int(start) if not err and int(start) else ptr, int(span)))
    held = [base + length - ptr for base, length in extents if base <= ptr < base + length]
    return min(held) if held else None


class _Imports:
    """This process's IPC imports, under one lock: pools by key, counted by their open pools and buffers, and
    pool pointers by export data, counted by the DeviceBufs that map them.

    A pointer is imported once per process and shared (seen: a second cuMemPoolImportPointer of one
    pointer returns the same address from a device pool, and one cuMemFreeAsync unmaps both; from a pinned host
    pool it fails with CUDA_ERROR_ALREADY_MAPPED).  Its last unmap frees it under the lock, so an import racing
    it cannot get the address back from the driver just before the free takes it away.  A release that a
    collection starts inside this thread's own section (any allocation there may collect an imported buffer or
    pool) is queued and done as the section ends, instead of deadlocking on the lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder = 0  # the thread in the section
        self._queued: list[tuple[str, int, bytes | None, int]] = []  # releases collections started in it
        self._entries: dict[str, list[Any]] = {}  # key -> [handle, device, refs, int(handle)]
        # (pool key, export data) -> (base here, bytes mapped from it: mapped_extent, None if the driver won't say)
        self._bases: dict[tuple[str, bytes], tuple[int, int | None]] = {}
        self._maps: dict[tuple[str, int], int] = {}  # (pool key, base) -> DeviceBufs that map it

    def _enter(self) -> None:
        self._lock.acquire()
        self._holder = threading.get_ident()

    def _leave(self) -> None:
        queued = self._queued
        while queued:
            try:
                self._release(*queued.pop())
            except Exception:
                pass  # a collection's release: nothing can be raised to anyone
        self._holder = 0
        self._lock.release()

    def _pool(self, desc: IpcPool | None, key: str, device: Device, op: str) -> list[Any]:
        """Pool `key`'s entry, counted once more; imported from `desc` if not open here.  In the section."""
        entry = self._entries.get(key)
        if entry is None:
            if desc is None:
                raise InvalidState("cuda", op, detail="this descriptor was sent without its pool, which is not open "
                                   "in this process: send ipc.export(pool) and open it here first (IpcPool.open())")
            device._bind_here()
            h = call("cuMemPoolImportFromShareableHandle", desc._fd,
                     driver().CUmemAllocationHandleType(POSIX_FD), 0)
            entry = self._entries[key] = [h, device, 0, int(h)]
        elif entry[1].ordinal != device.ordinal:
            raise invalid(op, f"the pool is open here on cuda:{entry[1].ordinal}, not cuda:{device.ordinal}")
        entry[2] += 1
        return entry

    def _release(self, key: str, base: int, data: bytes | None, stream: int) -> None:
        """One DeviceBuf of `base` less (`data` None: an open pool's count only): the last frees the pointer here,
        on `stream`, synchronized; then one count of pool `key` less, the last destroying it.  In the section."""
        try:
            if data is not None:
                mk = (key, base)
                left = self._maps.get(mk, 1) - 1
                if left:
                    self._maps[mk] = left
                else:
                    self._maps.pop(mk, None)
                    self._bases.pop((key, data), None)
                    if not _driver.forked:
                        _core.mem_free_async(base, stream)
                        _core.stream_sync(stream)
        finally:
            entry = self._entries.get(key)
            if entry is not None:
                entry[2] -= 1
                if entry[2] <= 0:
                    del self._entries[key]
                    if not _driver.forked:
                        call("cuMemPoolDestroy", entry[0])

    def open_pool(self, desc: IpcPool, device: Device) -> DriverPool:
        """IpcPool.open(): an imported DriverPool that holds one count of the import."""

        self._enter()
        try:
            handle = self._pool(desc, desc.key, device, "cuMemPoolImportFromShareableHandle")[0]
        finally:
            self._leave()
        pool = DriverPool._make(handle, device, owned=True, ipc=True, imported=True)
        pool._closer = _Release(self, desc.key)
        return pool

    def map(self, desc: IpcPool | None, key: str, device: Device, data: bytes, op: str) -> tuple[int, int | None]:
        """The base of the pointer `data` names in pool `key` (imported now, or shared), counted once more, and
        the bytes mapped from it (None: the driver did not say), asked once per import."""
        export = (key, data)
        self._enter()
        try:
            entry = self._pool(desc, key, device, op)
            got = self._bases.get(export)
            if got is None:
                try:
                    base = _core.pool_import_pointer(entry[3], data)
                except BaseException:
                    self._release(key, 0, None, 0)
                    raise
                got = self._bases[export] = (base, mapped_extent(base))
            mk = (key, got[0])
            self._maps[mk] = self._maps.get(mk, 0) + 1
            return got
        finally:
            self._leave()

    def release(self, key: str, base: int = 0, data: bytes | None = None, stream: int = 0) -> None:
        """A mapped DeviceBuf's end (`data` given) or an imported DriverPool's close: see `_release`."""
        if self._holder == threading.get_ident():  # a collection inside this thread's section: done as it ends
            self._queued.append((key, base, data, stream))
            return
        self._enter()
        try:
            self._release(key, base, data, stream)
        finally:
            self._leave()

    def count(self) -> int:
        self._enter()
        try:
            return len(self._entries)
        finally:
            self._leave()


class _Release:
    __slots__ = ("imports", "key")

    def __init__(self, imports: _Imports, key: str):
        self.imports, self.key = imports, key

    def __call__(self) -> None:
        self.imports.release(self.key)


_imports = _Imports()


def _export_pool(pool: DriverPool) -> IpcPool:
    op = "cuMemPoolExportToShareableHandle"
    pool._check_open(op)
    if pool.imported:
        raise invalid(op, "an imported pool cannot be exported again")
    if not pool.ipc:
        raise invalid(op, "the pool was not created for IPC (dev.create_driver_pool(ipc=True))")
    with pool._lock:
        if pool._exported is None:
            fd = int(call(op, pool._h, driver().CUmemAllocationHandleType(POSIX_FD), 0))
            pool._exported = IpcPool._make(fd, pool.device.uuid, os.getpid(), _uuid.uuid4().hex)
        return pool._exported


# -- buffers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class IpcBuffer:
    """What another process needs to map a buffer: picklable; `open()` it there.

    `kind` is "pool" or "legacy" (see the module docstring); `handle` is the
    64-byte export data; `offset` the buffer's place in the exported
    allocation; `size`/`dtype` its elements; `pool` the pool's descriptor, or
    None in a `without_pool()` copy, which names its pool by `pool_key`.
    """

    kind: str
    device_uuid: str
    pid: int
    size: int
    dtype: str
    offset: int
    handle: bytes = field(repr=False)
    pool: IpcPool | None = None
    pool_key: str = ""

    @property
    def nbytes(self) -> int:
        return self.size * _dtypes.spec(self.dtype, "IpcBuffer")[2]

    @classmethod
    def _make(cls, kind: str, device_uuid: str, pid: int, size: int, dtype: str, offset: int, handle: bytes,
              pool: IpcPool | None = None, pool_key: str = "") -> IpcBuffer:
        """The descriptor without the frozen dataclass's __init__ (9 object.__setattr__ calls): export()
        and without_pool() make one per call."""
        d = object.__new__(cls)
        d.__dict__.update(kind=kind, device_uuid=device_uuid, pid=pid, size=size, dtype=dtype, offset=offset,
                          handle=handle, pool=pool, pool_key=pool_key)
        return d

    def without_pool(self) -> IpcBuffer:
        """This pool buffer's descriptor without its pool's file descriptor: cheap to send again and again.

        It opens only in a process where its pool is open (`IpcPool.open()`, or a buffer of it that is).
        """
        if self.kind != "pool":
            raise invalid("IpcBuffer.without_pool", f"a {self.kind} descriptor has no pool")
        if self.pool is None:
            return self
        bare = self.__dict__.get("_bare")
        if bare is None:  # made once: export() hands out the same descriptor while its buffer is open
            bare = self.__dict__["_bare"] = IpcBuffer._make(self.kind, self.device_uuid, self.pid, self.size,
                                                            self.dtype, self.offset, self.handle, None, self.pool.key)
        return bare

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_bare", None)  # a cache, not part of the descriptor
        return state

    def open(self, device: Device | None = None) -> DeviceBuf:
        """Map the buffer in this process: a DeviceBuf on the device with this descriptor's UUID."""
        op = "cuMemPoolImportPointer" if self.kind == "pool" else "cuIpcOpenMemHandle"
        if self.kind not in ("pool", "legacy") or len(self.handle) != HANDLE_SIZE or (
            self.kind == "pool" and not isinstance(self.pool, IpcPool)
            and not (self.pool is None and isinstance(self.pool_key, str) and self.pool_key)
        ):
            raise invalid(op, "not a descriptor made by ipc.export")
        _other_process(self.pid, op)
        dev = _device_for(self.device_uuid, device, op)
        dt, npdt, itemsize = _dtypes.spec(self.dtype, op)
        if self.kind == "pool":
            return self._open_pool(dev, dt, npdt, op)
        return self._open_legacy(dev, dt, itemsize, op)

    def _open_pool(self, dev: Device, dt: Any, npdt: Any, op: str) -> DeviceBuf:
        buf, extent = self._map_pool(dev, dt, npdt, op)
        need = self.offset + self.size * npdt.itemsize
        if extent is not None and extent < need:
            buf.close()  # the last of the import's counts: nothing stays imported
            raise invalid(op, f"the imported allocation has {extent} bytes; the descriptor asks for {need}")
        return buf

    def _map_pool(self, dev: Device, dt: Any, npdt: Any, op: str) -> tuple[DeviceBuf, int | None]:
        """The pool buffer mapped, not yet checked against the import's extent (the bytes mapped from its base,
        or None); cuda.core's compat checks it with cuda.core's own error."""
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size <= 0:
            raise invalid(op, f"not a descriptor made by ipc.export (size {self.size!r})")
        offset = self.offset
        if offset.__class__ is not int or not 0 <= offset <= _MAX_SPAN - self.size * npdt.itemsize:
            raise invalid(op, f"not a descriptor made by ipc.export (offset {offset!r} for {self.size} elements)")
        if not isinstance(self.handle, (bytes, bytearray)):
            raise invalid(op, "not a descriptor made by ipc.export (handle)")
        pool = self.pool
        if pool is None:
            key = self.pool_key
        else:
            if pool._fd is None:
                raise closed(op, "pool descriptor")
            key = pool.key
        data = self.handle if self.handle.__class__ is bytes else bytes(self.handle)
        base, extent = _imports.map(pool, key, dev, data, op)
        home = dev.default_stream
        # memory.adopt's checks hold here (a mapped address; the size, checked above): the buffer is made directly,
        # since Python's share of an open + close is a visible part of it (bench/experiments/probe_ipc.py).
        buf = _core.DeviceBuf._wrap(base + self.offset, self.size, dt, npdt, dev, home, _core.RELEASE_IMPORTED,
                                    base=(None, _PoolUnmap(base, home._h, key, data)))
        return buf, extent

    def _open_legacy(self, dev: Device, dt: Any, itemsize: int, op: str) -> DeviceBuf:
        dev._bind_here()
        handle = handle_from_bytes(driver().CUipcMemHandle, self.handle)
        base = int(call(op, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        err, got = try_call("cuMemGetAddressRange", base)
        if not err and int(got[1]) < self.offset + self.size * itemsize:
            call("cuIpcCloseMemHandle", base)
            raise invalid(op, f"the mapped allocation has {int(got[1])} bytes; the descriptor asks for "
                          f"{self.offset + self.size * itemsize}")
        home = dev.default_stream
        return adopt(base + self.offset, self.size, dt, dev, stream=home, release=_LegacyUnmap(dev, base, home))


class _PoolUnmap:
    """An imported pool pointer's release (the compiled core calls `release()` once the buffer ends)."""

    __slots__ = ("base", "stream", "key", "data")

    def __init__(self, base: int, stream: int, key: str, data: bytes | None):
        self.base, self.stream, self.key, self.data = base, stream, key, data

    def release(self) -> None:
        data, self.data = self.data, None
        if data is not None:  # not released already (a close racing a collection)
            _imports.release(self.key, self.base, data, self.stream)


class _LegacyUnmap:
    __slots__ = ("device", "base", "stream")

    def __init__(self, device: Device, base: int, stream: Any):
        self.device, self.base, self.stream = device, base, stream

    def __call__(self) -> None:
        release_after(self.device, self.stream, "cuIpcCloseMemHandle", self.base)


def _export_buffer(buf: DeviceBuf) -> IpcBuffer:
    op = "ipc.export"
    if buf.ptr is None:
        raise closed(op, "buffer")
    dev = buf.device
    dev._check_open(op)
    ptr = buf.ptr
    for ref in tuple(ipc_pools):
        pool = ref()
        if pool is None or pool.device.ordinal != dev.ordinal:
            continue
        owner = pool._owner_of(ptr)  # a closed pool's outstanding buffers too: _export_pool says it is closed
        if owner is None:
            continue
        base, nbytes = owner
        if ptr + buf.nbytes > base + nbytes:
            raise invalid(op, "the buffer reaches past its pool allocation")
        desc = _export_pool(pool)
        # An allocation's export data is fixed for its life (cuda.core keeps it on the Buffer too): made once,
        # dropped when the allocation is freed.  cuMemPoolExportPointer is a slow driver call
        # (bench/experiments/probe_ipc.py times it).
        raw = pool._export_data.get(base)
        if raw is None:
            raw = handle_bytes(call("cuMemPoolExportPointer", base))
            with pool._lock:
                if base in pool._live:  # not freed meanwhile
                    pool._export_data[base] = raw
        made = IpcBuffer._make("pool", desc.device_uuid, desc.pid, buf.size, buf.dtype.value, ptr - base, raw,
                               desc)
        buf._ipc = made  # export() hands it out again while the buffer is open, so the allocation lives
        return made
    attr = driver().CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
    err, pool_handle = try_call("cuPointerGetAttribute", attr, ptr)
    if not err and pool_handle and int(pool_handle):
        raise invalid(op, "stream-ordered memory cannot be exported with a legacy handle: allocate it from "
                      "dev.create_driver_pool(ipc=True), or with DirectAllocator (cuMemAlloc)")
    dev._bind_here()
    base, _size = call("cuMemGetAddressRange", ptr)
    base = int(base)
    op = "cuIpcGetMemHandle"
    err, handle = try_call(op, base)
    if err:
        raise driver_error(err, op, "only memory from cuMemAlloc (DirectAllocator) or an IPC pool can be exported")
    return IpcBuffer._make("legacy", dev.uuid, os.getpid(), buf.size, buf.dtype.value, ptr - base, handle_bytes(handle))


# -- events -------------------------------------------------------------------------------


@dataclass(frozen=True)
class IpcEvent:
    """An interprocess event's handle, picklable; `open()` it in the other process."""

    device_uuid: str
    pid: int
    handle: bytes = field(repr=False)

    def open(self, device: Device | None = None) -> Event:
        """The exporter's event in this process (record, wait on, synchronize; timing is off)."""

        op = "cuIpcOpenEventHandle"
        if len(self.handle) != HANDLE_SIZE:
            raise invalid(op, "not a descriptor made by ipc.export")
        _other_process(self.pid, op)
        dev = _device_for(self.device_uuid, device, op)
        dev._bind_here()
        h = call(op, handle_from_bytes(driver().CUipcEventHandle, self.handle))
        return Event._make(int(h), dev, False)


def create_event(device: Device) -> Event:
    """An event that other processes can open (CU_EVENT_INTERPROCESS, timing off)."""

    op = "cuEventCreate"
    if not isinstance(device, Device):
        raise invalid(op, f"expected a Device, got {type(device).__name__}")
    device._check_open(op)
    device._bind_here()
    h = call(op, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING)
    return Event._make(int(h), device, False)


def _export_event(event: Event) -> IpcEvent:
    op = "cuIpcGetEventHandle"
    if event.closed:
        raise closed(op, "event")
    device = cast(Any, event).device
    device._bind_here()
    err, handle = try_call(op, event._h)
    if err:
        raise driver_error(err, op, "only events made by ipc.create_event (CU_EVENT_INTERPROCESS) can be exported")
    return IpcEvent(device.uuid, os.getpid(), handle_bytes(handle))


# -- the one export ---------------------------------------------------------------------


def export(obj: Any) -> Any:
    """A picklable descriptor of a DeviceBuf (IpcBuffer), a DriverPool (IpcPool) or an IPC Event (IpcEvent)."""
    if isinstance(obj, _core.DeviceBuf):
        made = obj._ipc  # a pool buffer's, kept from its first export (an open buffer's allocation is live)
        if made is not None and obj.ptr is not None and made.pool._fd is not None:  # and its pool is open
            return made
        return _export_buffer(obj)

    if isinstance(obj, DriverPool):
        return _export_pool(obj)
    if isinstance(obj, Event):
        return _export_event(obj)
    raise invalid("ipc.export", f"cannot export {type(obj).__name__}; export a DeviceBuf, a DriverPool or an Event")


# -- legacy handles by address, in the current context -------------------------------------------------------------
# The driver's own IPC handles as HANDLE_SIZE bytes, for code that keeps contexts of its own and carries the bytes its
# own way (PyCUDA's mem_get_ipc_handle and IPCMemoryHandle, cuda.core's IPC events): the context current on the
# calling thread exports and opens, whoever made it current; nothing here opens or binds a device, and nothing here
# owns what it opens.  `export` and the descriptors' `open()` are the object forms.


def _handle(data: Any, op: str) -> bytes:
    if not isinstance(data, (bytes, bytearray)) or len(data) != HANDLE_SIZE:
        raise invalid(op, f"expected the {HANDLE_SIZE} bytes of an IPC handle, got {data!r:.80}")
    return bytes(data)


def memory_handle(ptr: int) -> bytes:
    """The legacy IPC handle of the `cuMemAlloc` allocation at `ptr` (cuIpcGetMemHandle), as HANDLE_SIZE bytes that
    `open_memory_handle` maps in another process.  Stream-ordered and managed memory have none (the driver's
    CUDA_ERROR_INVALID_VALUE); `export` handles pool memory."""
    op = "cuIpcGetMemHandle"
    return handle_bytes(call(op, _address(ptr, op)))


def open_memory_handle(handle: bytes, *, lazy_peer_access: bool = True) -> int:
    """Map another process's allocation from its `memory_handle` bytes into the current context
    (cuIpcOpenMemHandle): its device address here, until `close_memory_handle`.  `lazy_peer_access`
    (CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) lets the memory be on a peer of the current device."""
    op = "cuIpcOpenMemHandle"
    data = _handle(handle, op)
    if not isinstance(lazy_peer_access, bool):
        raise invalid(op, f"lazy_peer_access must be a bool, got {lazy_peer_access!r}")
    flags = CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS if lazy_peer_access else 0
    return int(call(op, handle_from_bytes(driver().CUipcMemHandle, data), flags))


def close_memory_handle(ptr: int) -> None:
    """Unmap what `open_memory_handle` mapped at `ptr` (cuIpcCloseMemHandle); the exporter's memory is untouched."""
    op = "cuIpcCloseMemHandle"
    call(op, _address(ptr, op))


def event_handle(event: Event | int) -> bytes:
    """The IPC handle of an interprocess event (an Event or a CUevent address; made with CU_EVENT_INTERPROCESS and
    timing off) as HANDLE_SIZE bytes, for `open_event_handle` in another process (cuIpcGetEventHandle)."""
    op = "cuIpcGetEventHandle"
    return handle_bytes(call(op, _event_handle(event, op, "event")))


def open_event_handle(handle: bytes) -> int:
    """Another process's event from its `event_handle` bytes, opened in the current context (cuIpcOpenEventHandle):
    a CUevent address that the caller owns and destroys (cuEventDestroy)."""
    op = "cuIpcOpenEventHandle"
    return int(call(op, handle_from_bytes(driver().CUipcEventHandle, _handle(handle, op))))


# -- Unix sockets --------------------------------------------------------------------------

_HEADER = struct.Struct("!Q")
_MAX_FDS = 64


def send(sock: socket.socket, obj: Any) -> None:
    """Send `obj` (descriptors, or anything holding them) over a Unix socket, file descriptors as SCM_RIGHTS."""
    if not isinstance(sock, socket.socket) or sock.family != socket.AF_UNIX:
        raise invalid("ipc.send", f"expected an AF_UNIX socket, got {sock!r}")
    _fd_slots.out = []
    try:
        data = pickle.dumps(obj)
        fds = list(_fd_slots.out)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise invalid("ipc.send", f"cannot pickle {type(obj).__name__}: {exc}") from exc
    finally:
        _fd_slots.out = None
    if len(fds) > _MAX_FDS:
        raise invalid("ipc.send", f"{len(fds)} file descriptors in one message; send at most {_MAX_FDS}")
    message = _HEADER.pack(len(data)) + data
    sent = socket.send_fds(sock, [message], fds)
    if sent < len(message):
        sock.sendall(message[sent:])


def recv(sock: socket.socket) -> Any:
    """Receive what `send` sent; file descriptors that arrive but are not used are closed."""
    if not isinstance(sock, socket.socket) or sock.family != socket.AF_UNIX:
        raise invalid("ipc.recv", f"expected an AF_UNIX socket, got {sock!r}")
    data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, _MAX_FDS)
    if not data:
        raise InvalidState("cuda", "ipc.recv", detail="the socket was closed by the other side")
    while len(data) < _HEADER.size:
        data += _recv_some(sock)
    (length,) = _HEADER.unpack_from(data)
    while len(data) < _HEADER.size + length:
        data += _recv_some(sock)
    slots = list(fds)
    _fd_slots.incoming = slots
    try:
        return pickle.loads(data[_HEADER.size:_HEADER.size + length])
    finally:
        _fd_slots.incoming = None
        for fd in slots:
            if fd >= 0:
                os.close(fd)


def _recv_some(sock: socket.socket) -> bytes:
    chunk = sock.recv(1 << 16)
    if not chunk:
        raise InvalidState("cuda", "ipc.recv", detail="the socket closed in the middle of a message")
    return chunk
