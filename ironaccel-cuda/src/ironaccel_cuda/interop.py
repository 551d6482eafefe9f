"""Memory kinds, DLPack and zero-copy hand-over of the CUDA ComputeDevice (the execution model's memory hooks).

* memory="host" is mapped page-locked memory (cuMemHostAlloc with DEVICEMAP): a kernel binds it through its
  device address, the host maps it for the buffer's life, so `buffer.map()`, `np.asarray(buffer)` and DLPack
  (kDLCPU) see it without a copy; it is freed once the buffer is closed and no array over it is left;
* exportable memory is one physical allocation (cuMemCreate with POSIX fd handles) mapped at a reserved
  address; `export_memory` gives its fd (cuMemExportToShareableHandle), which Vulkan and GL import as an
  opaque fd;
* `import_memory` takes an opaque fd: from CUDA it is imported and mapped again (cuMemImportFromShareableHandle),
  from Vulkan or GL it is external memory (cuImportExternalMemory, cuExternalMemoryGetMappedBuffer);
* `import_fence` takes a timeline semaphore's opaque fd (cuImportExternalSemaphore); a queue signals and waits
  on it on the GPU (cuSignal/WaitExternalSemaphoresAsync).  CUDA cannot read such a semaphore from the host,
  so a host wait is a GPU wait on a stream of the fence's own followed by an event.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from ironaccel import DType
from ironaccel.errors import InvalidArgument, InvalidState, IronAccelError, Unsupported

from . import _core, _dlpack, _driver
from ._driver import call, driver
from .errors import BACKEND
from .memory import adopt

__all__ = ["ImportedFence", "create_memory", "export_memory", "host_view", "import_dlpack", "import_fence",
           "import_memory", "map_buffer"]

POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_POLL = 50e-6


class _Host:
    """Mapped page-locked memory: the PinnedBuf, and its bytes as an array (which keeps it alive)."""

    __slots__ = ("pinned", "array")

    def __init__(self, pinned: Any):
        self.pinned = pinned
        self.array = pinned.array


def _nothing() -> None:
    """An adopted buffer's release where its keepalive is what frees (dropped by close)."""


def create_memory(device: Any, nbytes: int, dtype: DType, memory: str, exportable: bool) -> Any:
    """A DeviceBuf of `nbytes` bytes of host memory, or of exportable device memory."""
    size = nbytes // dtype.itemsize
    if memory == "host":
        if exportable:
            raise Unsupported(BACKEND, "alloc", "host memory (cuMemHostAlloc) has no fd to export; allocate "
                              "exportable device memory")
        pinned = device.alloc_pinned(nbytes, "uint8", mapped=True)
        host = _Host(pinned)
        buf = device.device_view(host.array)
        view = adopt(buf.ptr, size, dtype, device, release=_nothing, keepalive=host)
        buf.close()
        return view
    from .vmm import VirtualBuffer

    vb = VirtualBuffer._create(device, nbytes, exportable=True)
    try:
        vb.resize(nbytes)
    except BaseException:
        vb.close()
        raise
    return adopt(vb.ptr, size, dtype, device, release=vb.close, keepalive=vb)


def host_array(buf: Any) -> np.ndarray:
    """The uint8 array over a host buffer's memory (it keeps the memory alive)."""
    keep = buf._base[0] if isinstance(buf._base, tuple) else None
    if not isinstance(keep, _Host):
        raise InvalidState(BACKEND, "map", detail="this buffer's host memory is gone")
    return keep.array


@contextlib.contextmanager
def map_buffer(buf: Any, write: bool) -> Iterator[np.ndarray]:
    """`DeviceBuf.map()`: the compute kit's mapping rules over the buffer's device."""
    device = buf.device
    array, persistent = device._map_buffer(buf, bool(write))
    try:
        yield array
    finally:
        device._unmap_buffer(buf, None if persistent else array, bool(write))


def host_view(buf: Any, op: str) -> np.ndarray:
    """A typed array over a host buffer without a copy (what `np.asarray` and DLPack export)."""
    if buf.ptr is None:
        from .errors import closed

        raise closed(op, "buffer")
    return buf.device._map_buffer(buf, True, op)[0]  # type: ignore[no-any-return]


# -- DLPack ------------------------------------------------------------------------------------------------

def import_dlpack(device: Any, obj: Any) -> tuple[Any, DType, int]:
    """(DeviceBuf, dtype, size) over a DLPack producer's CUDA memory on this device, without a copy."""
    op = "from_dlpack"
    kind, ordinal = obj.__dlpack_device__()
    if int(kind) not in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED):
        raise InvalidArgument(BACKEND, op, detail=f"a DLPack tensor on device type {kind} cannot be used by the CUDA "
                              "ComputeDevice (kDLCPU is copied, kDLCUDA of this device is taken as it is)")
    if int(ordinal) != device.ordinal:
        raise InvalidArgument(BACKEND, op, detail=f"the tensor lives on cuda:{ordinal}, this device is "
                              f"cuda:{device.ordinal}")
    consumer = int(device._state.default_stream.handle)
    try:
        try:
            capsule = obj.__dlpack__(stream=consumer, max_version=(1, 0))
        except TypeError:
            capsule = obj.__dlpack__(stream=consumer)
        imported = _dlpack.consume(capsule)
    except IronAccelError:
        raise
    except Exception as exc:
        raise InvalidArgument(BACKEND, op, detail=f"the DLPack export failed: {type(exc).__name__}: {exc}") from None
    size = int(np.prod(imported.shape)) if imported.shape else 1
    if not imported.contiguous or size == 0 or imported.readonly:
        imported.release()
        raise InvalidArgument(BACKEND, op, detail=f"the tensor must be contiguous, writable and non-empty (shape "
                              f"{imported.shape}, strides {imported.strides}, read-only {imported.readonly})")
    return adopt(imported.ptr, size, imported.dtype, device, release=imported.release), imported.dtype, size


# -- external memory ---------------------------------------------------------------------------------------

def export_memory(device: Any, buf: Any) -> tuple[int, int, bool]:
    """(fd, bytes, dedicated) of an exportable buffer's one physical allocation."""
    vb = buf._base[0] if isinstance(buf._base, tuple) else None
    if vb is None or not getattr(vb, "_chunks", None):
        raise InvalidState(BACKEND, "export_memory", detail="the buffer's exportable allocation is gone")
    _, size, handle = vb._chunks[0]
    device._bind_here()
    fd = int(call("cuMemExportToShareableHandle", handle, driver().CUmemAllocationHandleType(POSIX_FD), 0))
    return fd, int(size), False


class _External:
    """Memory imported from another API: the mapped pointer and the external memory object."""

    __slots__ = ("extmem", "dptr", "device")

    def __init__(self, extmem: Any, dptr: int, device: Any):
        self.extmem = extmem
        self.dptr = dptr
        self.device = device

    def release(self) -> None:
        extmem, self.extmem = self.extmem, None
        if extmem is not None and not _driver.forked:
            _core.ensure(self.device._state.ctx)  # the buffer may be closed on a thread with no context current
            call("cuMemFree", self.dptr)
            call("cuDestroyExternalMemory", extmem)


def _check_fd(fd: int, nbytes: int, size: int, op: str) -> None:
    """A regular file or memfd must hold what it claims (an fd of a GPU driver is a character device)."""
    try:
        info = os.fstat(fd)
    except OSError as exc:
        raise InvalidArgument(BACKEND, op, detail=f"the fd is not open: {exc}") from None
    if stat.S_ISREG(info.st_mode) and info.st_size < size:
        raise InvalidArgument(BACKEND, op, detail=f"the fd holds {info.st_size} bytes, the export claims {size}")
    if stat.S_ISDIR(info.st_mode) or stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode):
        raise InvalidArgument(BACKEND, op, detail="the fd is not exported GPU memory (a directory, pipe or socket)")


def import_memory(device: Any, fd: int, nbytes: int, dtype: DType, ext: Any) -> Any:
    """A DeviceBuf over `nbytes` of memory another API (or another CUDA device) exported; owns `fd` on success."""
    op = "import_memory"
    if ext.handle_type != "opaque_fd":
        raise InvalidArgument(BACKEND, op, detail=f"CUDA imports opaque fds, got a {ext.handle_type!r} handle")
    _check_fd(fd, nbytes, ext.size, op)
    device._bind_here()
    size = nbytes // dtype.itemsize
    if ext.backend == BACKEND:  # CUDA's own export: a shareable handle of a physical allocation, mapped again
        return _import_vmm(device, fd, nbytes, dtype, ext.size)
    drv = driver()
    desc = drv.CUDA_EXTERNAL_MEMORY_HANDLE_DESC()
    desc.type = drv.CUexternalMemoryHandleType.CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD
    desc.size = ext.size
    desc.flags = drv.CUDA_EXTERNAL_MEMORY_DEDICATED if ext.dedicated else 0
    # `fd` is the kit's duplicate of the export's fd: CUDA owns it once imported (and closes it with the external
    # memory); a refused import leaves it to the kit, which closes it unless the driver did (close_duplicate).
    desc.handle.fd = fd
    extmem = call("cuImportExternalMemory", desc)
    try:
        mapped = drv.CUDA_EXTERNAL_MEMORY_BUFFER_DESC()
        mapped.offset = 0
        mapped.size = nbytes
        mapped.flags = 0
        dptr = int(call("cuExternalMemoryGetMappedBuffer", extmem, mapped))
    except BaseException:
        call("cuDestroyExternalMemory", extmem)
        raise
    held = _External(extmem, dptr, device)
    return adopt(dptr, size, dtype, device, release=held.release, keepalive=held)


def _import_vmm(device: Any, fd: int, nbytes: int, dtype: DType, size: int) -> Any:
    from .vmm import VirtualBuffer

    drv = driver()
    handle = call("cuMemImportFromShareableHandle", fd, drv.CUmemAllocationHandleType(POSIX_FD))
    try:
        vb = VirtualBuffer._create(device, size)
    except BaseException:
        call("cuMemRelease", handle)
        raise
    at = vb._ptr
    try:
        call("cuMemMap", at, size, 0, handle, 0)
    except BaseException:
        call("cuMemRelease", handle)
        vb.close()
        raise
    try:
        call("cuMemSetAccess", at, size, vb._descs(), len(vb._access))
    except BaseException:
        call("cuMemUnmap", at, size)
        call("cuMemRelease", handle)
        vb.close()
        raise
    vb._chunks.append((0, size, handle))
    vb.nbytes = size
    os.close(fd)  # the import holds the allocation; the fd is ours to close
    return adopt(vb.ptr, nbytes // dtype.itemsize, dtype, device, release=vb.close, keepalive=vb)


# -- external fences ---------------------------------------------------------------------------------------

class ImportedFence:
    """A timeline semaphore another API exported: queues signal and wait on it on the GPU; the host waits through
    a stream of its own (CUDA cannot read the semaphore's value), and `value` is the highest one seen reached."""

    __slots__ = ("sem", "device", "reached", "stream", "waits", "lock")

    def __init__(self, sem: Any, device: Any):
        self.sem = sem
        self.device = device
        self.reached = 0
        self.stream: Any = None
        #: (value, event) of host waits queued on `stream`, and signals queued by this side.
        self.waits: list[tuple[int, Any]] = []
        self.lock = threading.Lock()

    def _params(self, kind: str, value: int) -> Any:
        drv = driver()
        params = getattr(drv, f"CUDA_EXTERNAL_SEMAPHORE_{kind}_PARAMS")()
        params.params.fence.value = value
        params.flags = 0
        return params

    def signal(self, stream: Any, value: int) -> None:
        call("cuSignalExternalSemaphoresAsync", [self.sem], [self._params("SIGNAL", value)], 1, stream.handle)
        event = self.device.create_event()
        stream.record(event)
        self.waits.append((value, event))

    def wait_on(self, stream: Any, value: int) -> None:
        call("cuWaitExternalSemaphoresAsync", [self.sem], [self._params("WAIT", value)], 1, stream.handle)

    def value(self) -> int:
        done = [(v, e) for v, e in self.waits if e.query()]
        for v, e in done:
            self.reached = max(self.reached, v)
            e.close()
            self.waits.remove((v, e))
        return self.reached

    def wait(self, value: int, seconds: float | None) -> bool:
        if value <= self.value():
            return True
        event = next((e for v, e in self.waits if v >= value), None)
        if event is None:  # a GPU wait on the fence's own stream, then an event the host can wait for
            if self.stream is None:
                self.stream = self.device.create_stream(non_blocking=True)
            self.wait_on(self.stream, value)
            event = self.device.create_event()
            self.stream.record(event)
            self.waits.append((value, event))
        if seconds is None:
            event.synchronize()
        else:
            deadline = time.monotonic() + seconds
            while not event.query():
                if time.monotonic() >= deadline:
                    return False
                time.sleep(_POLL)
        self.value()
        return True

    def close(self) -> None:
        """Destroy the imported semaphore (idempotent; the device's close closes what is left open)."""
        sem, self.sem = self.sem, None
        if sem is None:
            return
        pools = self.device.__dict__.get("_pools", [])
        if self in pools:
            pools.remove(self)
        if _driver.forked:
            return
        _core.ensure(self.device._state.ctx)  # also while the device handle closes (it closes its pools last)
        for _, event in self.waits:
            event.close()
        self.waits.clear()
        if self.stream is not None:
            self.stream.close()  # a wait still queued there ends with the semaphore's signal; destroy does not block
        call("cuDestroyExternalSemaphore", sem)


def import_fence(device: Any, fd: int) -> ImportedFence:
    """An imported timeline semaphore (owns `fd` on success)."""
    op = "import_fence"
    try:
        info = os.fstat(fd)
    except OSError as exc:
        raise InvalidArgument(BACKEND, op, detail=f"the fd is not open: {exc}") from None
    if stat.S_ISDIR(info.st_mode) or stat.S_ISFIFO(info.st_mode) or stat.S_ISSOCK(info.st_mode):
        raise InvalidArgument(BACKEND, op, detail="the fd is not an exported semaphore (a directory, pipe or socket)")
    device._bind_here()
    drv = driver()
    desc = drv.CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC()
    desc.type = drv.CUexternalSemaphoreHandleType.CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD
    desc.handle.fd = fd  # the kit's duplicate: CUDA's once imported, the kit's to close if refused
    desc.flags = 0
    sem = call("cuImportExternalSemaphore", desc)
    fence = ImportedFence(sem, device)
    device._pools.append(fence)  # closed with the device handle if not before
    return fence
