"""cuda.core's `Buffer` and `MemoryResource`.

A Buffer is `size` bytes at an address, owned by a memory resource (its `deallocate`
frees it), by an ironaccel object (a `DeviceBuf` from stream-ordered allocation, a
`PinnedBuf`), by an arbitrary `owner`, or by nobody.  Copies and fills are
stream-ordered on the stream given.  Buffers from `DeviceMemoryResource` hold an
ironaccel `DeviceBuf`: allocation and free are ironaccel's compiled hot path.

As in cuda.core, a graph node that uses a Buffer shares its allocation: the first
such use moves the memory into an `_Allocation` that the Buffer and every node
holding it reference, and `close()` then drops only the Buffer's claim, so the
memory is freed when the last holder (often a CUDA user object of a graph clone
or of an executable graph still running) lets go.
"""

from __future__ import annotations

import abc
from typing import Any

from ironaccel_cuda.memory import copy_async

from .. import _ia
from .._dlpack import classify_dl_device, export_versioned
from .._stream import Stream_accept, default_stream, for_device, order_after
from .._utils.cuda_utils import driver, from_ironaccel, pointer_attribute

__all__ = ["Buffer", "MemoryResource"]

_new = _ia.CompatBuffer.__new__
_UNIFIED = 4  # CU_MEMORYTYPE_UNIFIED
_HOST = 1  # CU_MEMORYTYPE_HOST
_DEVICE = 2  # CU_MEMORYTYPE_DEVICE


class MemoryResource(abc.ABC):
    """Base of every memory resource: `allocate` gives Buffers that `deallocate` takes back."""

    __slots__ = ("__weakref__",)

    @abc.abstractmethod
    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        """`size` bytes, stream-ordered on `stream` where the resource is."""

    @abc.abstractmethod
    def deallocate(self, ptr: Any, size: int, *, stream: Any = None) -> None:
        """Give back memory from `allocate`."""

    @property
    @abc.abstractmethod
    def is_device_accessible(self) -> bool: ...

    @property
    @abc.abstractmethod
    def is_host_accessible(self) -> bool: ...

    @property
    def is_managed(self) -> bool:
        return False

    @property
    @abc.abstractmethod
    def device_id(self) -> int: ...


class Buffer(_ia.CompatBuffer):
    """Memory of a memory resource (or foreign memory), with copies, fills and DLPack.

    Its fields and the hot paths of `close`, `copy_from` and `copy_to` are compiled (`_core.CompatBuffer`); what
    they do not take comes back to the `_cold` methods here."""

    __slots__ = ()
    _ptr: int
    _size: int
    _mr: Any
    _owner: Any
    _mem: Any
    _stream: Any
    _free_stream: Any
    _attrs: tuple[int, bool, bool, bool] | None
    _shared: _Allocation | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Buffer objects cannot be instantiated directly. Please use MemoryResource APIs.")

    @classmethod
    def _init(cls, ptr: Any, size: int, mr: Any = None, ipc_descriptor: Any = None, owner: Any = None, *,
              stream: Any = None) -> Buffer:
        if mr is not None and owner is not None:
            raise ValueError("owner and memory resource cannot be both specified together")
        b = _new(cls)  # every field None until set (_core.CompatBuffer)
        b._ptr = int(ptr)
        b._size = size
        b._mr = mr
        b._owner = owner
        b._stream = stream
        return b

    @classmethod
    def _adopt(cls, mem: Any, size: int, mr: Any, stream: Any) -> Buffer:
        """A Buffer over ironaccel-owned memory `mem` (DeviceBuf or PinnedBuf), freed by closing `mem`."""
        b = cls._init(mem.ptr, size, mr, stream=stream)
        b._mem = mem
        return b

    @staticmethod
    def from_handle(ptr: Any, size: int, mr: Any = None, owner: Any = None, *, stream: Any = None) -> Buffer:
        """A Buffer over memory at `ptr`: `mr.deallocate` frees it on close when `mr` is given; `owner` is kept."""
        return Buffer._init(ptr, size, mr, owner=owner, stream=stream)

    # -- IPC (see _ipc.py) ----------------------------------------------------------

    @classmethod
    def from_ipc_descriptor(cls, mr: Any, ipc_descriptor: Any, *, stream: Any = None) -> Buffer:
        """Map a buffer another process exported (`ipc_descriptor`) through `mr`, its pool mapped here."""
        from ._ipc import IPCBufferDescriptor

        if not isinstance(ipc_descriptor, IPCBufferDescriptor):
            raise TypeError(f"Argument 'ipc_descriptor' has incorrect type (expected "
                            f"cuda.core._memory._ipc.IPCBufferDescriptor, got {type(ipc_descriptor).__name__})")
        importer = getattr(mr, "_import_ipc_buffer", None)
        if importer is None:
            raise TypeError("this descriptor was exported from a memory pool buffer and must be imported with a "
                            f"DeviceMemoryResource or PinnedMemoryResource, not {type(mr).__name__}")
        return importer(ipc_descriptor, stream)  # type: ignore[no-any-return]

    @property
    def ipc_descriptor(self) -> Any:
        """What another process needs to map this buffer (its resource must be IPC-enabled)."""
        from ._ipc import ImportedFrom

        source = self._owner
        if source.__class__ is ImportedFrom:
            return source.descriptor
        mr = self._mr
        if self._ptr == 0 and mr is None and self._mem is None:
            raise RuntimeError("the buffer is closed")
        exporter = getattr(mr, "_export_ipc_buffer", None)
        if exporter is None or not mr.is_ipc_enabled:
            raise RuntimeError("Memory resource is not IPC-enabled")
        return exporter(self)

    def get_ipc_descriptor(self) -> Any:
        return self.ipc_descriptor

    @staticmethod
    def _reduce_helper(mr: Any, ipc_descriptor: Any) -> Buffer:
        if not _ia.current_context():  # a spawned child unpickles its arguments before its target runs
            from .._device import Device

            ordinal = mr.device_id  # -1 for pinned memory: the default device
            (Device(ordinal) if ordinal >= 0 else Device()).set_current()
        return Buffer.from_ipc_descriptor(mr, ipc_descriptor, stream=default_stream())

    def __reduce__(self) -> tuple[Any, ...]:
        from ._ipc import ImportedFrom

        source = self._owner
        if source.__class__ is ImportedFrom:  # an imported buffer, sent on (possibly closed meanwhile)
            return (Buffer._reduce_helper, (source.mr, source.descriptor))
        return (Buffer._reduce_helper, (self._mr, self.ipc_descriptor))

    # -- lifetime -----------------------------------------------------------------

    def _close_cold(self, stream: Any) -> None:
        """close(): memory a graph node also holds is freed when the last holder lets go (see `_share`).

        A bad or closed `stream` raises before anything is let go: the buffer stays open, as in cuda.core."""
        if stream is not None:
            stream = _stream_accept(stream, "Buffer.close")
        shared = self._shared
        if shared is not None:
            self._shared = None
            self._mem = None
            self._ptr = 0
            self._mr = None
            if stream is not None:
                shared.stream = stream
            return
        mem = self._mem
        if mem is not None:
            self._mem = None
            self._ptr = 0
            self._mr = None
            if stream is not None and stream is not self._stream and mem.__class__ is _ia.DeviceBuf:
                _order_free(mem, stream, self._stream)
            elif stream is not None and mem.__class__ is not _ia.DeviceBuf:
                stream.sync()
            try:
                owner = self._owner  # None for a resource's own buffers: no lookup of ImportedFrom on their close
                if stream is None and owner is not None and owner.__class__ is _imported_from():
                    # An imported buffer is unmapped at once, and code written for cuda.core commonly closes one
                    # right after queuing a copy on another stream (cuda.core's own memory_ipc tests do): the copy
                    # then faulted (CUDA_ERROR_ILLEGAL_ADDRESS).  So the unmap waits for the device.
                    mem.device.synchronize()
                mem.close()
            except _ia.DriverError as exc:
                raise from_ironaccel(exc) from None
            return
        mr = self._mr
        if mr is not None:
            ptr, size = self._ptr, self._size
            self._mr = None
            self._ptr = 0
            s = stream if stream is not None else self._free_stream or self._stream
            if s is None:
                s = default_stream()
            mr.deallocate(ptr, size, stream=s)
            return
        self._ptr = 0
        self._owner = None

    def set_deallocation_stream(self, stream: Any) -> None:
        self._free_stream = _stream_accept(stream, "Buffer.set_deallocation_stream")
        owner = self._shared.owner if self._shared is not None else None
        if owner is not None:
            owner._free_stream = self._free_stream

    def _share(self) -> _Allocation | None:
        """The allocation this Buffer shares with graph nodes (made on first use), or None when the Buffer
        frees nothing (foreign memory, or closed)."""
        shared = self._shared
        if shared is None and (self._mem is not None or self._mr is not None):
            shared = self._shared = _Allocation(self)
        return shared

    def __enter__(self) -> Buffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_closed(self) -> bool:
        return self._ptr == 0 and self._mr is None and self._mem is None

    # -- copies and fills -----------------------------------------------------------

    def _copy_to_cold(self, dst: Buffer | None, stream: Any, options: Any) -> Buffer:
        s = _copy_stream(options, stream, "Buffer.copy_to")
        if dst is None:
            if self._mr is None:
                raise ValueError("a destination buffer must be provided (this buffer has no memory resource)")
            dst = self._mr.allocate(self._size, stream=s)
        elif not isinstance(dst, Buffer):
            raise TypeError(f"dst must be a Buffer, got {type(dst).__name__}")
        if dst._size != self._size:
            raise ValueError(f"buffer sizes mismatch between src and dst (sizes are: src={self._size}, "
                             f"dst={dst._size})")
        _copy_with(dst, self, s, options)
        return dst

    def _copy_from_cold(self, src: Buffer, stream: Any, options: Any) -> None:
        s = _copy_stream(options, stream, "Buffer.copy_from")
        if not isinstance(src, Buffer):
            raise TypeError(f"src must be a Buffer, got {type(src).__name__}")
        if src._size != self._size:
            raise ValueError(f"buffer sizes mismatch between src and dst (sizes are: src={src._size}, "
                             f"dst={self._size})")
        _copy_with(self, src, s, options)

    def fill(self, value: Any, *, stream: Any = None) -> None:
        """Fill with a byte (int 0-255) or repeat a 1-, 2- or 4-byte pattern (bytes or a numpy scalar)."""
        s = _stream_accept(stream, "Buffer.fill")
        val, width = _fill_value(value)
        size = self._size
        if width == 2 and size & 1:
            raise ValueError(f"buffer size ({size}) must be divisible by 2")
        if width == 4 and size & 3:
            raise ValueError(f"buffer size ({size}) must be divisible by 4")
        if size == 0:
            return
        from .._ia import call

        op = ("cuMemsetD8Async", "cuMemsetD16Async", None, "cuMemsetD32Async")[width - 1]
        try:
            call(op, driver.CUdeviceptr(self._ptr), val, size // width, s._h)  # type: ignore[arg-type]
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None

    # -- DLPack ---------------------------------------------------------------------

    def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A 1-D int8 DLPack tensor over the buffer (stream order is the caller's to keep); BufferError once closed."""
        versioned = export_versioned(max_version, dl_device, copy)
        if self._ptr == 0 and self._mr is None and self._mem is None and self._size:
            raise BufferError("Buffer.__dlpack__: the buffer is closed")
        from ironaccel import DType

        return _ia.dlpack.export(self._ptr, self._size, DType.INT8, self.__dlpack_device__(), self, versioned)

    def __dlpack_device__(self) -> tuple[int, int]:
        return classify_dl_device(self)

    # -- properties -----------------------------------------------------------------

    @property
    def handle(self) -> int:
        """The address (an int)."""
        return self._ptr

    @property
    def size(self) -> int:
        return self._size

    @property
    def memory_resource(self) -> Any:
        return self._mr

    @property
    def owner(self) -> Any:
        from ._ipc import ImportedFrom

        owner = self._owner
        return None if owner.__class__ is ImportedFrom else owner

    @property
    def device_id(self) -> int:
        mr = self._mr
        if mr is not None:
            return mr.device_id
        return self._pointer_attrs()[0]

    @property
    def is_device_accessible(self) -> bool:
        mr = self._mr
        if mr is not None:
            return mr.is_device_accessible
        return self._pointer_attrs()[1]

    @property
    def is_host_accessible(self) -> bool:
        mr = self._mr
        if mr is not None:
            return mr.is_host_accessible
        return self._pointer_attrs()[2]

    @property
    def is_managed(self) -> bool:
        mr = self._mr
        if mr is not None and mr.is_managed:
            return True
        return self._pointer_attrs()[3]

    @property
    def is_mapped(self) -> bool:
        """True for a buffer imported from another process (its resource is a mapped one)."""
        mr = self._mr
        return mr is not None and bool(getattr(mr, "is_mapped", False))

    def _pointer_attrs(self) -> tuple[int, bool, bool, bool]:
        """(device_id, device-accessible, host-accessible, managed) from the driver's pointer attributes."""
        attrs = self._attrs
        if attrs is None:
            attrs = self._attrs = _query_pointer(self._ptr)
        return attrs

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Buffer):
            return NotImplemented
        return self._ptr == other._ptr and self._size == other._size

    def __hash__(self) -> int:
        return hash((self._ptr, self._size))

    def __repr__(self) -> str:
        return f"<Buffer ptr={self._ptr:#x} size={self._size}>"


def _imported_from() -> type:
    from ._ipc import ImportedFrom

    return ImportedFrom


class _Allocation:
    """Memory that a Buffer shares with the graph nodes using it; freed when the last of them drops it.

    It holds a private Buffer that owns the memory (the same resource, DeviceBuf and streams), closed by
    `__del__`: from the last holder's release, which for a graph's CUDA user object is the main thread's
    drain of the driver's releases (ironaccel_cuda._core.graph_attach)."""

    __slots__ = ("owner", "stream", "__weakref__")

    def __init__(self, buf: Buffer):
        owner = Buffer._init(buf._ptr, buf._size, buf._mr, stream=buf._stream)
        owner._mem = buf._mem
        owner._free_stream = buf._free_stream
        owner._owner = buf._owner
        self.owner: Buffer | None = owner
        self.stream: Any = None  # the stream the Buffer's close() named, if it named one

    def __del__(self) -> None:
        owner, self.owner = self.owner, None
        if owner is not None:
            try:
                owner.close(self.stream)
            except Exception:  # a finalizer: nothing to raise to (the context may be gone at exit)
                pass


def claims(objects: Any) -> list[Any]:
    """What a graph node holds for `objects`: the objects, and the shared allocation of every Buffer among
    them (or among the items of a tuple or list among them), so closing the Buffer keeps the memory."""
    held = list(objects)
    for obj in objects:
        items = obj if isinstance(obj, (tuple, list)) else (obj,)
        for item in items:
            if isinstance(item, Buffer):
                shared = item._share()
                if shared is not None:
                    held.append(shared)
    return held


def _stream_accept(stream: Any, op: str = "cuda.core") -> Any:
    return Stream_accept(stream, op=op)


def _copy_stream(options: Any, stream: Any, op: str = "Buffer.copy") -> Any:
    """`stream` accepted for `copy_to`/`copy_from`, after cuda.core's checks of their options: a CopyOptions, not
    with LEGACY_DEFAULT_STREAM nor a capturing stream (a graph cannot hold copy attributes)."""
    if options is None:
        return _stream_accept(stream, op)
    from ..graph._graph_builder import GraphBuilder
    from ._copy_ops import CopyOptions

    if not isinstance(options, CopyOptions):
        raise TypeError(f"options must be a CopyOptions or None, got {type(options).__name__}")
    if isinstance(stream, GraphBuilder):
        raise TypeError("options cannot be used while capturing a graph (a graph node cannot carry copy "
                        "attributes): pass options=None or use graph.GraphNode.memcpy")
    s = _stream_accept(stream, op)
    if int(s.handle) in (0, 1):
        raise TypeError("options are not accepted with LEGACY_DEFAULT_STREAM: use PER_THREAD_DEFAULT_STREAM")
    if s.is_capturing:
        raise TypeError("options cannot be used on a capturing stream (a graph node cannot carry copy "
                        "attributes): pass options=None or use graph.GraphNode.memcpy")
    return s


def _copy_with(dst: Buffer, src: Buffer, s: Any, options: Any) -> None:
    """dst <- src on `s`: a plain copy, or with `options` one copy of a batch (cuMemcpyBatchAsync), which honors
    every option on a CUDA 13.0 driver (cuda.core asks 13.2's cuMemcpyWithAttributesAsync and, before it, drops
    them or raises for DURING_API_CALL)."""
    if options is None or src._size == 0:
        _copy(dst, src, s)
        return
    from ._copy_ops import copy_batch

    copy_batch(s, [src], [dst], options=options)


def _order_free(mem: Any, stream: Any, home: Any) -> None:
    """Make `mem`'s home stream wait for the work queued on `stream`, so that the free comes after it."""
    ordinal = mem.device.ordinal
    s = for_device(_stream_accept(stream), ordinal)
    home_stream = for_device(home, ordinal) if home is not None else None
    if home_stream is not None and s is not home_stream:
        order_after(home_stream, s, mem.device)


class _HostPoolMemory:
    """Marks host-accessible pool memory in `_copy` (never instantiated)."""


def _copy(dst: Buffer, src: Buffer, s: Any) -> None:
    n = src._size
    if n == 0:
        return
    a, b = dst._mem.__class__, src._mem.__class__
    if (a is _ia.DeviceBuf and dst._mr.is_host_accessible) or (b is _ia.DeviceBuf and src._mr.is_host_accessible):
        a = b = _HostPoolMemory  # page-locked or managed pool memory: the driver's unified copy routes it
    try:
        if a is _ia.DeviceBuf:
            if b is _ia.DeviceBuf:
                _ia.memcpy_dtod(int(dst._ptr), int(src._ptr), n, s._h)
                return
            if b is _ia.PinnedBuf:
                _ia.memcpy_htod(int(dst._ptr), src._ptr, n, s._h)
                return
        elif a is _ia.PinnedBuf and b is _ia.DeviceBuf:
            _ia.memcpy_dtoh(dst._ptr, int(src._ptr), n, s._h)
            return
        copy_async(int(dst._ptr), int(src._ptr), n, s)
    except _ia.DriverError as exc:
        raise from_ironaccel(exc) from None


def _fill_value(value: Any) -> tuple[int, int]:
    """(the fill value as an unsigned int, its width in bytes: 1, 2 or 4)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= 255:
            raise OverflowError(f"value must be in range [0, 255], got {value}")
        return value, 1
    if isinstance(value, str):
        raise TypeError("value must be an int or a buffer-protocol object of 1, 2 or 4 bytes, got str")
    try:
        raw = bytes(memoryview(value).cast("B"))
    except TypeError:
        raise TypeError(f"value must be an int or a buffer-protocol object of 1, 2 or 4 bytes, got "
                        f"{type(value).__name__}") from None
    if len(raw) not in (1, 2, 4):
        raise ValueError(f"value must be 1, 2 or 4 bytes long, got {len(raw)} bytes")
    return int.from_bytes(raw, "little"), len(raw)


def _query_pointer(ptr: int) -> tuple[int, bool, bool, bool]:
    if ptr == 0:
        return (-1, False, True, False)
    kind = pointer_attribute(ptr, "memory_type")
    if kind is None:
        return (-1, False, True, False)  # not memory the driver knows: pageable host memory
    managed = bool(pointer_attribute(ptr, "is_managed"))
    found = pointer_attribute(ptr, "device_ordinal")
    ordinal = -1 if found is None else found
    if managed or kind == _UNIFIED:
        return (ordinal, True, True, True)
    if kind == _HOST:
        return (ordinal, True, True, False)
    return (ordinal, True, False, False)

