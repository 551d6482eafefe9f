"""`ComputeDeviceBase`: the ComputeDevice protocol written once, over a backend's vendor calls.

A backend subclasses it, calls `_open(...)` at the end of its constructor,
and fills in its vendor calls:

    _create_buffer(nbytes, dtype, data)  -> vendor buffer (data: flat uint8 to fill it with, or None;
                                         with `any_array`, the caller's C-contiguous array, in each of these)
    _free_buffer(handle)                 free it once the work that uses it has finished
    _recycle(handle)                     optional: keep a closed buffer's vendor object for reuse (True), no
                                         vendor call; the default keeps none
    _write(handle, data)                 copy flat uint8 `data` into the start, ordered after earlier work
    _read(handle, out)                   copy the first out.size bytes into flat uint8 `out`, after earlier work
    _prepare(code, entry)                -> (code the compiler takes, a hashable key for the program cache);
                                         text code by default
    _build(code, entry, buffers, params, workgroup_size) -> Program (with its Interface)
    _launch(program, handles, dims, params) -> serial of the submission
    _wait(serial, seconds)               -> True once `serial` has finished (seconds: <= WAIT_SLICE, or None)
    _shutdown()                          destroy what is left (programs are released and work waited for first)

and keeps two ints, `_submitted` (the last serial) and `_completed` (the last
serial known finished).

The execution model (plugin contract 1.2: queues, fences, command batches,
timestamps, typed params, constants, memory kinds and mapping, DLPack,
external memory and fences; see `execution`) adds optional vendor calls, each
raising `Unsupported` until a backend provides it and declares the feature in
`execution_features` (or `_open(features=)`):

    _queue_limit() -> int                 queues the device can have, the default one included (1)
    _create_queue(priority) -> (vq, priority used);  _destroy_queue(vq)   ("queues")
    _launch_on(vq, program, handles, dims, params) -> serial;  _wait_on(vq, serial, seconds) -> bool
    _last_serial(vq) -> int               the serial of the queue's last submission (vq None: `_submitted`)
    _create_fence(value, exportable) -> vf;  _destroy_fence(vf);  _fence_value(vf) -> int
    _fence_wait(vf, value, seconds) -> bool;  _signal(vq, vf, value);  _wait_fence(vq, vf, value)   ("fences";
                                          without them the kit's `EmulatedFence` serves a device of one queue)
    _record(commands, timestamps) -> rec;  _submit(vq, rec, waits, signals) -> serial   ("batches")
    _update(rec, index, command) -> bool  re-bound in place (False: the kit has it re-recorded)
    _finish(rec, serial)                  that submission finished: fill its reads' `out` arrays
    _timings(rec, serial) -> [(start_ns, end_ns)] per command   ("timestamps");  _free_recording(rec)
    _compile(code, entry, buffers, params, workgroup_size, constants) -> Program   ("constants", "typed_params":
                                          `params` None means "from the code"; the Program's Interface
                                          carries the reflected ParamBlock)
    _create_memory(nbytes, dtype, memory, exportable) -> vendor buffer   (kinds in `memory_kinds` besides
                                          plain "device" memory)
    _memory_of(handle) -> (host_visible, persistent)
    _map(handle, write) -> int | ndarray  a persistent mapping's address (the kit pins the memory while any
                                          array over it lives), or a host array standing in for it (a mapping
                                          by copy; `_unmap(handle, array, write)` writes it back)   ("map")
    _import_dlpack(obj) -> (vendor buffer, dtype, size)   device memory a DLPack producer hands over
    _export_memory(handle) -> (fd, nbytes);  _import_memory(fd, nbytes, dtype, ext) -> vendor buffer
    _export_fence(vf) -> fd;  _import_fence(fd) -> vf  Everything else -- every argument check, the
program cache, handle lifetimes and ownership, the one rule for binding a
buffer twice, element types against the shader's declarations, waiting and
its timeouts, fork detection, garbage-collected handles, idempotent close --
is here, so each rule is written once (see `ironaccel.protocols.ComputeDevice`
for the rules themselves) and `ironaccel.testing.conformance` checks it on
every backend.  This is the shape of tinygrad's `LRUAllocator` and wgpu-py's
`_classes.py`: the API once, each backend its vendor calls.

Calls are serialized by `_lock` (an RLock).  A backend whose vendor objects
belong to one thread passes `_open(..., thread_bound=make_current)`: calls
from other threads raise InvalidState, buffers closed there are freed at the
next call on the owning thread, and `make_current()` runs before vendor calls
(OpenGL's EGL context); its `_lock` is a no-op, since only that thread gets
past the checks.  The per-call methods take the lock with acquire() and
release() in try/finally: 0.11 us on an RLock, where `with` takes 0.19.
Every call runs the checks in `_enter`; they are attribute tests only, since
they are paid on every dispatch.
"""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import os
import struct
import threading
import weakref
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ..errors import ClosedError, InvalidArgument, InvalidState, Timeout, Unsupported
from ..types import DeviceDescriptor, DType
from . import process
from .execution import (
    FEATURES,
    MEMORY_KINDS,
    Command,
    CommandBatch,
    EmulatedFence,
    ExternalFence,
    ExternalMemory,
    Fence,
    Queue,
    Timings,
    constants_key,
    dtype_bytes,
    fence_value,
)
from .checks import (
    _PACKERS,
    buffer_list,
    check_out,
    count,
    element_count,
    element_type,
    entry_name,
    host_buffer,
    numpy_dtype,
    pack_params,
    workgroups,
)
from .checks import workgroup_size as workgroup_size_of
from .handles import _ITEMSIZE, BufferHandle, PipelineHandle, Program, ProgramCache, Submission, wait_for
from .params import ParamBlock
from .shaders import check_bindings, source_text

__all__ = ["ComputeDeviceBase", "flat_bytes"]

#: Unique values for `ComputeDeviceBase._epoch` (next() is atomic: two threads never store the same one).
_EPOCHS = itertools.count(1)


_U8 = np.dtype(np.uint8)


def flat_bytes(array: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a C-contiguous array (the array itself where it is one)."""
    if array.ndim == 1:
        return array if array.dtype is _U8 else array.view(_U8)
    return array.reshape(-1).view(_U8)


class _Unlocked:
    """The lock of a thread-bound device.  Calls from other threads are refused before they change anything
    (`_enter`, `_thread_ok`; a buffer closed there is only queued, on a thread-safe deque), so the owner's calls
    need no lock.  A no-op lock: acquire, release, __enter__ and __exit__ are one C function that takes any
    arguments and returns "", a false value (so an exception raised inside a `with` block propagates), about
    half the cost of an uncontended RLock, paid on every call."""

    __slots__ = ()
    acquire = release = __enter__ = __exit__ = "".format


_UNLOCKED = _Unlocked()
_get_ident = threading.get_ident


class ComputeDeviceBase:
    """A ComputeDevice; subclasses provide the vendor calls listed in the module docstring."""

    backend: ClassVar[str] = ""
    #: The code a pipeline takes, for messages: "WGSL", "GLSL 430", "SPIR-V", ...
    language: ClassVar[str] = ""
    buffer_type: ClassVar[type[BufferHandle]] = BufferHandle
    pipeline_type: ClassVar[type[PipelineHandle]] = PipelineHandle
    submission_type: ClassVar[type[Submission]] = Submission
    #: Unused programs kept per device (programs an open pipeline uses always stay).
    max_programs: ClassVar[int] = 128
    buffer_limit_name: ClassVar[str] = "the device's buffer limit"
    group_limit_name: ClassVar[str] = "the device's workgroup-count limit"
    binding_limit_name: ClassVar[str] = "the device's storage-buffer limit"
    params_limit_name: ClassVar[str] = "the device's params limit"
    #: The vendor calls take the caller's C-contiguous array as it is (its bytes, `nbytes` of them), not a flat
    #: uint8 view of it (a view costs about 0.15 us an upload or download).
    any_array: ClassVar[bool] = False
    #: The execution-model features this backend provides (see `execution.FEATURES`); `_open(features=)` may
    #: narrow them per device.
    execution_features: ClassVar[frozenset[str]] = frozenset()
    #: Memory kinds `alloc(memory=)` takes on this backend ("device" always; `_open(memory_kinds=)` may narrow them
    #: per device), and those a dispatch may bind.
    supported_memory: ClassVar[tuple[str, ...]] = ("device",)
    bindable_memory: ClassVar[tuple[str, ...]] = MEMORY_KINDS

    descriptor: DeviceDescriptor
    max_buffer_bytes: int
    #: The serial of the last submission, and of the last one known to have finished.
    _submitted: int = 0
    _completed: int = 0

    def _open(self, descriptor: DeviceDescriptor, *, max_buffer_bytes: int, group_limits: Sequence[int],
              max_buffers: int | None = None, max_params: int | None = None, lock: Any = None,
              thread_bound: Callable[[], Any] | None = None, features: Any = None,
              memory_kinds: Sequence[str] | None = None) -> None:
        """Set up the kit's state; a subclass calls this once its vendor objects exist.

        `max_buffers`: the most storage buffers one pipeline may bind (`binding_limit_name`), None for no limit.
        `max_params`: the most 32-bit params one pipeline may take (`params_limit_name`), None for no limit.
        `lock`: a reentrant lock (acquire/release) the calls take; a new RLock by default.
        `thread_bound`: the device belongs to the calling thread, and this makes its context current there.
        `features`: the execution features this device has (default: the class's `execution_features`).
        `memory_kinds`: the memory kinds this device has (default: the class's `supported_memory`).
        """
        self.descriptor = descriptor
        self.max_buffer_bytes = int(max_buffer_bytes)
        self._group_limits = tuple(int(g) for g in group_limits)
        self._max_buffers = max_buffers
        self._max_params = max_params
        self._programs = ProgramCache(self.max_programs)
        self._garbage: deque[Any] = deque()
        if lock is None:
            lock = _UNLOCKED if thread_bound is not None else threading.RLock()
        elif not callable(getattr(lock, "acquire", None)) or not callable(getattr(lock, "release", None)):
            raise TypeError(f"lock must have acquire() and release() (a threading.RLock), got {lock!r}")
        self._lock = lock
        self._generation = process.generation()
        self._owner_thread = threading.get_ident() if thread_bound is not None else None
        self._make_current = thread_bound
        self._closed = False
        #: params go through the kit's packing rule (its packers are used inline), not a backend's own `_pack`
        self._kit_pack = type(self)._pack is ComputeDeviceBase._pack
        #: Changes whenever a buffer of this device is closed or collected (see `dispatch`).
        self._epoch = 0
        found = frozenset(self.execution_features if features is None else features)
        unknown = found - set(FEATURES)
        if unknown:
            raise ValueError(f"unknown execution features {sorted(unknown)}; known: {FEATURES}")
        self._features = found
        kinds = tuple(self.supported_memory if memory_kinds is None else memory_kinds)
        if "device" not in kinds or set(kinds) - set(MEMORY_KINDS):
            raise ValueError(f"memory kinds {kinds} must hold 'device' and only {MEMORY_KINDS}")
        self._memory_kinds = kinds
        self._unbindable = tuple(k for k in MEMORY_KINDS if k not in self.bindable_memory)
        self._queue = Queue(self, None, 0, 0)
        self._queues: list[Queue] = [self._queue]
        #: The serial known finished per queue (the default queue: `_completed`), and the read-backs and
        #: timings waiting for a submission to finish: (queue, serial, batch, recording, submission or None).
        self._done: dict[int, int] = {}
        self._finishes: list[tuple[Queue, int, CommandBatch, Any, Any]] = []
        #: Persistent mappings: arrays alive per vendor handle (by id), handles whose free waits for them, and
        #: whether closing waits for them before `_shutdown`.
        self._pins: dict[int, int] = {}
        self._pinned_frees: dict[int, Any] = {}
        self._shutdown_pending = False

    # -- vendor calls (see the module docstring) --------------------------------------------------------

    def _create_buffer(self, nbytes: int, dtype: DType, data: np.ndarray | None) -> Any:
        raise NotImplementedError

    def _free_buffer(self, handle: Any) -> None:
        raise NotImplementedError

    def _write(self, handle: Any, data: np.ndarray) -> None:
        raise NotImplementedError

    def _recycle(self, handle: Any) -> bool:
        """A buffer was closed on a thread that may use the device: True where the backend keeps its vendor object
        for a later `_create_buffer` without a vendor call (no context is made current for it); False frees it."""
        return False

    def _read(self, handle: Any, out: np.ndarray) -> None:
        raise NotImplementedError

    def _prepare(self, code: Any, entry: str) -> tuple[Any, Hashable]:
        """Text code (str or UTF-8 bytes, in `language`) by the kit's text rules; a binary-code backend overrides."""
        text = source_text(self.backend, code, self.language)
        return text, text

    def _build(self, code: Any, entry: str, buffers: int, params: int,
               workgroup_size: tuple[int, int, int]) -> Program:
        raise NotImplementedError

    def _launch(self, program: Any, handles: list[Any], dims: tuple[int, int, int], params: Any) -> int:
        raise NotImplementedError

    def _wait(self, serial: int, seconds: float | None) -> bool:
        raise NotImplementedError

    def _shutdown(self) -> None:
        raise NotImplementedError

    def _pack(self, program: Program, params: Any) -> Any:
        """The params as the launch takes them: the bytes of the code's reflected block (`ParamBlock.pack`), or
        32-bit words by the kit's rule where the code's block is not known."""
        block = program.block
        if block is not None:
            return block.pack(params, self.backend, "dispatch")
        if isinstance(params, (Mapping, np.void)) or dataclasses.is_dataclass(params):
            raise InvalidArgument(self.backend, "dispatch", detail="params by name need the code's parameter "
                                  "block, which this pipeline does not know (its code declares none that "
                                  f"{self.backend} can read, or it was made with params=N); pass the values in order")
        return pack_params(self.backend, params, program.params, "dispatch")

    def _thread_ok(self) -> bool:
        """False where this thread may not use the device (a thread-bound device, from another thread)."""
        owner = self._owner_thread
        return owner is None or threading.get_ident() == owner

    def _activate(self) -> None:
        """Make a thread-bound device's context current before vendor calls."""
        if self._make_current is not None:
            self._make_current()

    # -- vendor calls of the execution model (contract 1.2; each optional) -----------------------------------

    def _unsupported(self, op: str, feature: str) -> Unsupported:
        why = self._unsupported_reason(feature)
        return Unsupported(self.backend, op, why)

    def _unsupported_reason(self, feature: str) -> str:
        """Why this device lacks an execution feature (a backend overrides to say what its API or driver lacks)."""
        return f"the {self.backend} backend does not provide {feature!r}"

    def _queue_limit(self) -> int:
        return 1

    def _create_queue(self, priority: int) -> tuple[Any, int]:
        raise self._unsupported("create_queue", "queues")

    def _destroy_queue(self, vq: Any) -> None:
        pass

    def _launch_on(self, vq: Any, program: Any, handles: list[Any], dims: tuple[int, int, int], params: Any) -> int:
        if vq is None:
            return self._launch(program, handles, dims, params)
        raise self._unsupported("dispatch", "queues")

    def _wait_on(self, vq: Any, serial: int, seconds: float | None) -> bool:
        if vq is None:
            return self._wait(serial, seconds)
        raise self._unsupported("wait", "queues")

    def _last_serial(self, vq: Any) -> int:
        if vq is None:
            return self._submitted
        raise self._unsupported("signal", "queues")

    def _create_fence(self, value: int, exportable: bool) -> Any:
        raise self._unsupported("create_fence", "fences")

    def _destroy_fence(self, vf: Any) -> None:
        pass

    def _fence_value(self, vf: Any) -> int:
        raise self._unsupported("Fence.value", "fences")

    def _fence_wait(self, vf: Any, value: int, seconds: float | None) -> bool:
        raise self._unsupported("Fence.wait", "fences")

    def _signal(self, vq: Any, vf: Any, value: int) -> None:
        raise self._unsupported("signal", "fences")

    def _wait_fence(self, vq: Any, vf: Any, value: int) -> None:
        raise self._unsupported("wait", "fences")

    def _record(self, commands: Sequence[Command], timestamps: bool) -> Any:
        raise self._unsupported("batch", "batches")

    def _update(self, rec: Any, index: int, command: Command) -> bool:
        return False

    def _submit(self, vq: Any, rec: Any, waits: list[tuple[Any, int]], signals: list[tuple[Any, int]]) -> int:
        raise self._unsupported("submit", "batches")

    def _finish(self, rec: Any, serial: int) -> None:
        pass

    def _timings(self, rec: Any, serial: int) -> Sequence[tuple[float, float]]:
        raise self._unsupported("timings", "timestamps")

    def _free_recording(self, rec: Any) -> None:
        pass

    def _compile(self, code: Any, entry: str, buffers: int, params: int | None, workgroup_size: tuple[int, int, int],
                 constants: dict[str | int, Any]) -> Program:
        """Compile with constants; `params` None: as many as the code declares.  The default takes neither."""
        if constants:
            raise self._unsupported("pipeline", "constants")
        return self._build(code, entry, buffers, 0 if params is None else params, workgroup_size)

    def _create_memory(self, nbytes: int, dtype: DType, memory: str, exportable: bool) -> Any:
        raise self._unsupported("alloc", "export_memory" if exportable else f"memory={memory!r}")

    def _memory_of(self, handle: Any) -> tuple[bool, bool]:
        """(host_visible, persistent): whether `map()` works on this buffer, and whether its mapping stays valid
        for the buffer's life (then `np.asarray` and DLPack views need no copy)."""
        return False, False

    def _map(self, handle: Any, write: bool) -> Any:
        raise self._unsupported("map", "map")

    def _unmap(self, handle: Any, array: np.ndarray | None, write: bool) -> None:
        pass

    def _import_dlpack(self, obj: Any) -> tuple[Any, DType, int]:
        kind = _dlpack_device(obj)[0]
        raise InvalidArgument(self.backend, "from_dlpack", detail=f"a DLPack tensor on device type {kind} "
                              f"({_DLPACK_NAMES.get(kind, 'unknown')}) cannot be used by {self.backend}; hand GPU "
                              "memory over with export_memory() and import_memory()")

    def _export_memory(self, handle: Any) -> tuple[int, int]:
        raise self._unsupported("export_memory", "export_memory")

    def _import_memory(self, fd: int, nbytes: int, dtype: DType, ext: ExternalMemory) -> Any:
        raise self._unsupported("import_memory", "import_memory")

    def _export_fence(self, vf: Any) -> int:
        raise self._unsupported("export_fence", "export_fence")

    def _import_fence(self, fd: int) -> Any:
        raise self._unsupported("import_fence", "import_fence")

    # -- the protocol -----------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def alloc(self, size: int, dtype: Any = "float32", *, memory: str = "device",
              exportable: bool = False) -> BufferHandle:
        """A new buffer of `size` elements of `dtype` (contents undefined).

        `memory`: one of `memory_kinds` ("device", the default; "host": host-visible and bindable; "upload",
        "readback": host-visible staging).  `exportable`: the memory can be handed to another API with
        `export_memory`.
        """
        lock = self._lock
        lock.acquire()
        try:
            if self._owner_thread is not None or self._closed or self._garbage \
                    or self._generation != process._forks:  # else `_enter` has nothing to do
                self._enter("alloc")
            dt = element_type(self.backend, dtype, "alloc")
            itemsize = _ITEMSIZE[id(dt)]
            if type(size) is not int or not 0 < size * itemsize <= self.max_buffer_bytes:
                size = element_count(self.backend, size, dt, self.max_buffer_bytes, "alloc", self.buffer_limit_name)
            if memory == "device" and exportable is False:
                return self.buffer_type(self, self._create_buffer(size * itemsize, dt, None), dt, size)
            return self._alloc_kind(size, dt, memory, exportable)
        finally:
            lock.release()

    def _alloc_kind(self, size: int, dt: DType, memory: Any, exportable: Any) -> BufferHandle:
        if memory not in MEMORY_KINDS:
            raise InvalidArgument(self.backend, "alloc", detail=f"memory must be one of {MEMORY_KINDS}, got {memory!r}")
        if type(exportable) is not bool:
            raise InvalidArgument(self.backend, "alloc", detail=f"exportable must be a bool, got {exportable!r}")
        if memory not in self._memory_kinds:
            raise Unsupported(self.backend, "alloc", f"memory={memory!r} is not one of this device's kinds "
                              f"{self._memory_kinds}" + _KIND_NOTES.get((self.backend, memory), ""))
        if exportable and "export_memory" not in self._features:
            raise self._unsupported("alloc", "export_memory")
        buf = self.buffer_type(self, self._create_memory(size * _ITEMSIZE[id(dt)], dt, memory, exportable), dt, size)
        buf.memory = memory
        buf.exportable = exportable
        return buf

    def upload(self, array: Any) -> BufferHandle:
        """A new buffer holding a copy of a C-contiguous array, its elements taken in C order (flattened)."""
        lock = self._lock
        lock.acquire()
        try:
            if self._owner_thread is not None or self._closed or self._garbage \
                    or self._generation != process._forks:  # else `_enter` has nothing to do
                self._enter("upload")
            data, dt = host_buffer(self.backend, array, "upload")
            nbytes = data.nbytes
            if not 0 < nbytes <= self.max_buffer_bytes:
                element_count(self.backend, data.size, dt, self.max_buffer_bytes, "upload", self.buffer_limit_name)
            flat = data if self.any_array or data.ndim == 1 and data.dtype is _U8 else flat_bytes(data)
            return self.buffer_type(self, self._create_buffer(nbytes, dt, flat), dt, data.size)
        finally:
            lock.release()

    def write(self, buffer: BufferHandle, array: Any) -> None:
        """Copy a C-contiguous array's bytes into the start of `buffer`, ordered after earlier work."""
        lock = self._lock
        lock.acquire()
        try:
            if self._owner_thread is not None or self._closed or self._garbage \
                    or self._generation != process._forks:  # else `_enter` has nothing to do
                self._enter("write")
            handle = buffer.handle if type(buffer) is self.buffer_type and buffer._device is self else None
            if handle is None:
                handle = self._own(buffer, "write")
            data = host_buffer(self.backend, array, "write")[0]
            nbytes = data.nbytes
            if nbytes > buffer.nbytes:
                raise InvalidArgument(self.backend, "write", detail=f"{nbytes} bytes into a buffer of {buffer.nbytes}")
            if nbytes:
                self._write(handle, data if self.any_array else flat_bytes(data))
        finally:
            lock.release()

    def download(self, buffer: BufferHandle, out: Any = None) -> np.ndarray:
        """The buffer's contents as a new 1-D array, or its first out.nbytes raw bytes into `out`."""
        lock = self._lock
        lock.acquire()
        try:
            owner = self._owner_thread  # `_enter`, inline: the checks alone where they pass
            if self._closed or self._garbage or self._generation != process._forks:
                self._enter("download")
            elif owner is not None:
                if _get_ident() != owner:
                    self._enter("download")  # raises
                self._make_current()  # type: ignore[misc]
            handle = buffer.handle if type(buffer) is self.buffer_type and buffer._device is self else None
            if handle is None:
                handle = self._own(buffer, "download")
            if out is None:
                try:
                    out = np.empty(buffer.size, numpy_dtype(buffer.dtype))
                except TypeError as exc:  # bfloat16 without ml_dtypes
                    raise InvalidArgument(self.backend, "download", detail=f"{exc}; or pass out=") from None
            elif type(out) is not np.ndarray or not (flags := out.flags).c_contiguous or not flags.writeable \
                    or out.nbytes > buffer.nbytes or out.dtype.hasobject:
                check_out(self.backend, out, buffer.nbytes)
            if out.nbytes:
                self._read(handle, out if self.any_array else out.view(_U8) if out.ndim == 1 else flat_bytes(out))
            return out
        finally:
            lock.release()

    def pipeline(self, code: Any, entry: str = "main", *, buffers: int, params: Any = "auto",
                 workgroup_size: Any = (64, 1, 1), constants: Any = None) -> PipelineHandle:
        """A pipeline from `code`, compiled once per (code, entry, buffers, params, constants) on this device.

        `params`: "auto" (the default) takes the code's parameter block as the backend reflects it (none: 0);
        an int is the number of params in order (32-bit scalars where the code's block cannot be read).
        `constants`: specialization constants by name (see `pipeline.interface.constants`).
        """
        backend = self.backend
        with self._lock:
            self._enter("pipeline")
            buffers = count(backend, "buffers", buffers, limit=self._max_buffers, limit_name=self.binding_limit_name)
            wanted = None if type(params) is str and params == "auto" else \
                count(backend, "params", params, limit=self._max_params, limit_name=self.params_limit_name)
            entry = entry_name(backend, entry)
            size = workgroup_size_of(backend, workgroup_size)
            fixed = constants_key(backend, constants)
            if fixed and "constants" not in self._features:
                raise self._unsupported("pipeline", "constants")
            prepared, code_key = self._prepare(code, entry)
            key = (code_key, entry, buffers, wanted, fixed)
            program = self._programs.get(key)
            if program is None:
                program = self._compile(prepared, entry, buffers, wanted, size, dict(fixed))
                _settle_params(program, wanted)
                self._programs.add(key, program)
            return self.pipeline_type(self, program, entry, size)

    def dispatch(self, pipeline: PipelineHandle, buffers: Sequence[BufferHandle], groups: Any,
                 params: Any = ()) -> Submission:
        """Queue `pipeline` over `groups` workgroups on the default queue; returns at once with a Submission.

        `params`: values in order, or by name (a dict, a numpy structured scalar, a dataclass) where the
        code's parameter block is reflected (`pipeline.interface.params`).
        """
        lock = self._lock
        lock.acquire()
        try:
            owner = self._owner_thread  # `_enter`, inline: the checks alone where they pass
            if self._closed or self._garbage or self._generation != process._forks:
                self._enter("dispatch")
            elif owner is not None:
                if _get_ident() != owner:
                    self._enter("dispatch")  # raises
                self._make_current()  # type: ignore[misc]
            program, handles, dims, packed = self._checked(pipeline, buffers, groups, params)
            # Tried: object.__new__ and the two fields set here instead of Submission.__init__ (0.10 against 0.13 us
            # alone): no change measurable in a dispatch (kit 0.96-1.05 us either way, webgpu).
            return self.submission_type(self, self._launch(program, handles, dims, packed))
        finally:
            lock.release()

    def _checked(self, pipeline: Any, buffers: Any, groups: Any, params: Any) -> tuple[Program, list[Any],
                                                                                      tuple[int, int, int], Any]:
        """A dispatch's program, vendor buffers, workgroup counts and packed params, every rule checked."""
        program = pipeline.program if type(pipeline) is self.pipeline_type and pipeline._device is self else None
        if program is None:
            program = self._program_of(pipeline)
        # Each check's common case inline (exact types, in range); anything else takes the kit's functions,
        # which accept the other forms and raise in their order.
        limits = self._group_limits
        if type(groups) is tuple and len(groups) == 2 and type(gx := groups[0]) is int \
                and type(gy := groups[1]) is int and 0 < gx <= limits[0] and 0 < gy <= limits[1]:
            dims = (gx, gy, 1)
        else:
            dims = workgroups(self.backend, groups, limits, "dispatch", self.group_limit_name)
        if type(buffers) is not list and type(buffers) is not tuple or len(buffers) != program.buffers:
            buffers = buffer_list(self.backend, buffers, program.buffers)
        # The buffers this program was last dispatched with, unchanged since (no buffer of this device
        # closed or collected: each bumps the epoch, so these ids are still those live objects), passed
        # every check then and so pass them now.
        # (Spelled out for one and two buffers: tuple(map(id, ...)) takes 0.20 us where these take 0.06.)
        n = len(buffers)
        ids = (id(buffers[0]), id(buffers[1])) if n == 2 else (id(buffers[0]),) if n == 1 \
            else tuple(map(id, buffers))
        epoch = self._epoch
        memo = program.last_binding
        if memo is not None and memo[0] == ids and memo[1] == epoch:
            handles = memo[2]
        else:
            handles = self._bind(program, buffers)
            program.last_binding = (ids, epoch, handles)
        packer = None
        if type(params) is tuple and (k := len(params)) == program.params and self._kit_pack \
                and program.block is None:
            types = (type(params[0]), type(params[1]), type(params[2])) if k == 3 \
                else (type(params[0]), type(params[1])) if k == 2 else tuple(map(type, params))
            packer = _PACKERS.get(types)
        try:
            packed = packer(*params) if packer is not None else self._pack(program, params)
        except (struct.error, OverflowError):  # an int past the int32 range, or a value that fits no code
            packed = self._pack(program, params)
        return program, handles, dims, packed

    def synchronize(self) -> None:
        """Wait for everything submitted so far, on every queue."""
        with self._lock:
            self._enter("synchronize")
            last = self._submitted
            others = [(q, self._last_serial(q._vq)) for q in self._queues[1:] if not q._closed]
        self._wait_serial(last, None, "synchronize")
        for queue, serial in others:
            self._wait_queue_serial(queue, serial, None, "synchronize")
        self._settle()

    def close(self) -> None:
        """Wait for the device's work, then destroy it with every buffer and program; twice is a no-op.

        In a child forked after the device was opened, close forgets the device without a driver call.
        """
        with self._lock:
            if self._closed:
                return
            if self._generation != process._forks:
                self._closed = True
                return
            if not self._thread_ok():
                raise InvalidState(self.backend, "close", detail=self._thread_detail())
            self._activate()
            try:
                for queue in self._queues[1:]:
                    if not queue._closed:
                        self._wait_on(queue._vq, self._last_serial(queue._vq), None)
                if self._submitted > self._completed:
                    self._wait(self._submitted, None)
                self._settle()
            finally:
                self._closed = True
                self._garbage.clear()
                try:
                    self._programs.clear()
                    for queue in self._queues[1:]:
                        if not queue._closed:
                            queue._closed = True
                            self._destroy_queue(queue._vq)
                finally:
                    if self._pins:  # arrays over mapped memory still live: the last one shuts the device down
                        self._shutdown_pending = True
                    else:
                        self._shutdown()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.descriptor.ordinal}: {self.descriptor.name}" \
               f"{' closed' if self._closed else ''}>"

    # -- the execution model (contract 1.2) -------------------------------------------------------------

    @property
    def features(self) -> frozenset[str]:
        """The execution-model features this device has (`ironaccel.compute.execution.FEATURES`)."""
        return self._features

    @property
    def memory_kinds(self) -> tuple[str, ...]:
        """The memory kinds `alloc(memory=)` takes on this device (see `execution.MEMORY_KINDS`)."""
        return self._memory_kinds

    @property
    def queue(self) -> Queue:
        """The default queue: what `dispatch`, `upload`, `write`, `download` and `map` are ordered on."""
        return self._queue

    @property
    def max_queues(self) -> int:
        """How many queues this device can have at once, the default one included."""
        return self._queue_limit() if "queues" in self._features else 1

    def create_queue(self, priority: int = 0) -> Queue:
        """Another in-order queue (priority: 0 normal, higher more urgent, clamped to what the device has)."""
        with self._lock:
            self._enter("create_queue")
            if "queues" not in self._features:
                raise self._unsupported("create_queue", "queues")
            if isinstance(priority, bool) or not isinstance(priority, (int, np.integer)):
                raise InvalidArgument(self.backend, "create_queue", detail=f"priority must be an int, got {priority!r}")
            live = [q for q in self._queues if not q._closed]
            if len(live) >= self.max_queues:
                raise InvalidState(self.backend, "create_queue", detail=f"this device has {self.max_queues} "
                                   "queues and all are open; close one first")
            vq, used = self._create_queue(int(priority))
            queue = Queue(self, vq, max(q.index for q in self._queues) + 1, used)
            self._queues = live + [queue]
            return queue

    def create_fence(self, value: int = 0, *, exportable: bool = False) -> Fence:
        """A timeline fence starting at `value`; `exportable` to hand it to another API (`export_fence`)."""
        with self._lock:
            self._enter("create_fence")
            value = fence_value(self.backend, value, "create_fence")
            if type(exportable) is not bool:
                raise InvalidArgument(self.backend, "create_fence", detail=f"exportable must be a bool, got "
                                      f"{exportable!r}")
            if exportable and "export_fence" not in self._features:
                raise self._unsupported("create_fence", "export_fence")
            if "fences" not in self._features:
                raise self._unsupported("create_fence", "fences")
            vf = self._create_fence(value, exportable) if self._real_fences else EmulatedFence(value)
            return Fence(self, vf, value, exportable)

    def batch(self, *, timestamps: bool = False) -> CommandBatch:
        """A command batch to record into and submit many times (`timestamps`: time each command)."""
        with self._lock:
            self._enter("batch")
            if "batches" not in self._features:
                raise self._unsupported("batch", "batches")
            if type(timestamps) is not bool:
                raise InvalidArgument(self.backend, "batch", detail=f"timestamps must be a bool, got {timestamps!r}")
            if timestamps and "timestamps" not in self._features:
                raise self._unsupported("batch", "timestamps")
            return CommandBatch(self, timestamps)

    def submit(self, batch: CommandBatch, *, wait: Iterable[tuple[Fence, int]] = (),
               signal: Iterable[tuple[Fence, int]] = ()) -> Submission:
        """`device.queue.submit(batch, wait=, signal=)`."""
        return self._submit_on(self._queue, batch, wait, signal)

    def from_dlpack(self, obj: Any) -> BufferHandle:
        """A buffer from a DLPack producer: host memory (kDLCPU) is copied into a new buffer; device memory is the
        backend's to take without a copy where it can (CUDA memory of this device), else InvalidArgument."""
        kind = _dlpack_device(obj, self.backend)[0]
        if kind == _KDLCPU:
            try:
                array = np.from_dlpack(obj)
            except (TypeError, ValueError, BufferError, RuntimeError) as exc:
                raise InvalidArgument(self.backend, "from_dlpack", detail=f"numpy cannot take it: {exc}") from None
            return self.upload(np.ascontiguousarray(array))
        with self._lock:
            self._enter("from_dlpack")
            handle, dt, size = self._import_dlpack(obj)
            return self.buffer_type(self, handle, dt, size)

    def export_memory(self, buffer: BufferHandle) -> ExternalMemory:
        """An fd for `buffer`'s memory (allocated with `exportable=True`), for another API's `import_memory`."""
        with self._lock:
            self._enter("export_memory")
            handle = self._own(buffer, "export_memory")
            if "export_memory" not in self._features:
                raise self._unsupported("export_memory", "export_memory")
            if not buffer.exportable:
                raise InvalidArgument(self.backend, "export_memory", detail="the buffer was not allocated with "
                                      "exportable=True")
            fd, nbytes = self._export_memory(handle)
            return ExternalMemory(fd, nbytes, backend=self.backend)

    def import_memory(self, memory: ExternalMemory, size: int, dtype: Any = "float32") -> BufferHandle:
        """A buffer of `size` elements over memory another API exported (zero-copy; the fd stays `memory`'s)."""
        with self._lock:
            self._enter("import_memory")
            if "import_memory" not in self._features:
                raise self._unsupported("import_memory", "import_memory")
            if not isinstance(memory, ExternalMemory):
                raise InvalidArgument(self.backend, "import_memory", detail=f"expected an ExternalMemory, got "
                                      f"{type(memory).__name__}")
            dt = element_type(self.backend, dtype, "import_memory")
            size = element_count(self.backend, size, dt, self.max_buffer_bytes, "import_memory",
                                 self.buffer_limit_name)
            nbytes = size * dt.itemsize
            if nbytes > memory.size:
                raise InvalidArgument(self.backend, "import_memory", detail=f"{size} x {dt.value} is {nbytes} bytes, "
                                      f"the exported memory holds {memory.size}")
            fd = memory.dup(self.backend, "import_memory")
            try:
                handle = self._import_memory(fd, nbytes, dt, memory)
            except BaseException:
                os.close(fd)
                raise
            return self.buffer_type(self, handle, dt, size)

    def export_fence(self, fence: Fence) -> ExternalFence:
        """An fd for a fence made with `exportable=True`, for another API's `import_fence`."""
        with self._lock:
            self._enter("export_fence")
            vf = self._fence_of(fence, "export_fence")
            if not fence.exportable:
                raise InvalidArgument(self.backend, "export_fence", detail="the fence was not created with "
                                      "exportable=True")
            fd = self._export_fence(vf)
            fence._signalled = _U64  # the other side may signal it: waits can no longer be proven to end
            return ExternalFence(fd, backend=self.backend)

    def import_fence(self, fence: ExternalFence) -> Fence:
        """A fence over a timeline another API exported (both sides may signal and wait)."""
        with self._lock:
            self._enter("import_fence")
            if "import_fence" not in self._features:
                raise self._unsupported("import_fence", "import_fence")
            if not isinstance(fence, ExternalFence):
                raise InvalidArgument(self.backend, "import_fence", detail=f"expected an ExternalFence, got "
                                      f"{type(fence).__name__}")
            fd = fence.dup(self.backend, "import_fence")
            try:
                vf = self._import_fence(fd)
            except BaseException:
                os.close(fd)
                raise
            imported = Fence(self, vf, 0, False)
            imported._signalled = _U64
            return imported

    @property
    def _real_fences(self) -> bool:
        return type(self)._create_fence is not ComputeDeviceBase._create_fence

    # -- queues and fences: what the handles call -----------------------------------------------------------

    def _queue_of(self, queue: Any, op: str) -> Queue:
        if type(queue) is Queue and queue._device is self:
            if queue._closed:
                raise ClosedError(self.backend, op, "queue")
            return queue
        what = "a queue of another device" if isinstance(queue, Queue) else type(queue).__name__
        raise InvalidArgument(self.backend, op, detail=f"expected a queue of this device, got {what}")

    def _fence_of(self, fence: Any, op: str) -> Any:
        if type(fence) is Fence and fence._device is self:
            vf = fence._vf
            if vf is None:
                raise ClosedError(self.backend, op, "fence")
            return vf
        what = "a fence of another device" if isinstance(fence, Fence) else type(fence).__name__
        raise InvalidArgument(self.backend, op, detail=f"expected a fence of this device, got {what}")

    def _dispatch_on(self, queue: Queue, pipeline: Any, buffers: Any, groups: Any, params: Any) -> Submission:
        if queue is self._queue:
            return self.dispatch(pipeline, buffers, groups, params)
        with self._lock:
            self._enter("dispatch")
            self._queue_of(queue, "dispatch")
            program, handles, dims, packed = self._checked(pipeline, buffers, groups, params)
            serial = self._launch_on(queue._vq, program, handles, dims, packed)
            return self.submission_type(self, serial, queue)

    def _fence_points(self, queue: Queue, fence: Fence, value: Any, op: str) -> tuple[Any, int]:
        self._enter(op)
        self._queue_of(queue, op)
        return self._fence_of(fence, op), fence_value(self.backend, value, op)

    def _signal_on(self, queue: Queue, fence: Fence, value: Any) -> None:
        with self._lock:
            vf, value = self._fence_points(queue, fence, value, "signal")
            self._check_signal(fence, value, "signal")
            if isinstance(vf, EmulatedFence):
                vf.points.append((value, self._last_serial(queue._vq)))
                if queue is not self._queue:
                    raise self._unsupported("signal", "fences on several queues")
            else:
                self._signal(queue._vq, vf, value)
            fence._signalled = max(fence._signalled, value)

    def _check_signal(self, fence: Fence, value: int, op: str) -> None:
        if value <= fence._signalled and fence._signalled != _U64:
            raise InvalidArgument(self.backend, op, detail=f"a fence only increases: {value} is not above "
                                  f"{fence._signalled}, which it has already been (or will be) signalled to")

    def _wait_fence_on(self, queue: Queue, fence: Fence, value: Any) -> None:
        with self._lock:
            vf, value = self._fence_points(queue, fence, value, "wait")
            self._check_reachable(fence, value, "wait")
            if isinstance(vf, EmulatedFence):
                if queue is not self._queue:
                    raise self._unsupported("wait", "fences on several queues")
                return  # the one queue runs in order: whatever signalled `value` on it comes first
            self._wait_fence(queue._vq, vf, value)

    def _check_reachable(self, fence: Fence, value: int, op: str) -> None:
        if value > fence._signalled:
            raise InvalidState(self.backend, op, detail=f"nothing will signal the fence to {value}: the highest "
                               f"value submitted so far is {fence._signalled}, so the wait could never end")

    def _fence_value_of(self, fence: Fence) -> int:
        with self._lock:
            self._enter("Fence.value")
            vf = self._fence_of(fence, "Fence.value")
            if isinstance(vf, EmulatedFence):
                return vf.settle(self._poll_serial())
            return self._fence_value(vf)

    def _poll_serial(self) -> int:
        """The default queue's last finished serial, polled now."""
        if self._submitted > self._completed:
            self._activate()
            self._wait(self._completed + 1, 0.0)  # a poll: retires whatever has finished
        return self._completed

    def _fence_wait_for(self, fence: Fence, value: Any, timeout: Any) -> None:
        with self._lock:
            self._enter("Fence.wait")
            vf = self._fence_of(fence, "Fence.wait")
            value = fence_value(self.backend, value, "Fence.wait")
            if timeout is None:
                self._check_reachable(fence, value, "Fence.wait")

        def block(seconds: float | None) -> bool:
            with self._lock:
                if self._closed:
                    return True
                self._enter("Fence.wait")
                if isinstance(vf, EmulatedFence):
                    serial = vf.serial_for(value)
                    if serial is None:  # not signalled yet (a bounded wait): look again shortly
                        if seconds:
                            threading.Event().wait(min(seconds, 0.001))
                        return False
                    if serial > self._completed:
                        self._activate()
                        if not self._wait(serial, seconds):
                            return False
                    vf.settle(self._completed)
                    return True
                return self._fence_wait(vf, value, seconds)

        wait_for(self.backend, "Fence.wait", block, timeout, f"the fence to reach {value}")
        self._settle()

    def _release_fence(self, vf: Any) -> None:
        if isinstance(vf, EmulatedFence) or self._closed or self._generation != process._forks:
            return
        with self._lock:
            if not self._closed and self._thread_ok():
                self._activate()
                self._destroy_fence(vf)

    def _wait_queue_serial(self, queue: Queue, serial: int, timeout: Any, op: str = "wait") -> None:
        if queue is self._queue:
            self._wait_serial(serial, timeout, op)
            return
        if serial <= self._done.get(queue.index, 0):
            return

        def block(seconds: float | None) -> bool:
            with self._lock:
                if self._closed or queue._closed:
                    return True
                self._enter(op)
                self._activate()
                if self._wait_on(queue._vq, serial, seconds):
                    self._done[queue.index] = max(self._done.get(queue.index, 0), serial)
                    return True
                return False

        wait_for(self.backend, op, block, timeout)

    def _queue_serial_done(self, queue: Queue, serial: int) -> bool:
        if queue is self._queue:
            return self._serial_done(serial)
        try:
            self._wait_queue_serial(queue, serial, 0.0, "done")
        except Timeout:
            return False
        return True

    def _synchronize_queue(self, queue: Queue) -> None:
        with self._lock:
            self._enter("synchronize")
            self._queue_of(queue, "synchronize")
            serial = self._last_serial(queue._vq)
        self._wait_queue_serial(queue, serial, None, "synchronize")
        self._settle()

    def _close_queue(self, queue: Queue) -> None:
        with self._lock:
            if queue._closed or self._closed:
                queue._closed = True
                return
            self._enter("Queue.close")
            self._activate()
            self._wait_on(queue._vq, self._last_serial(queue._vq), None)
            self._settle()
            queue._closed = True
            self._destroy_queue(queue._vq)

    # -- command batches ------------------------------------------------------------------------------------

    def _batch_of(self, batch: Any, op: str) -> CommandBatch:
        if type(batch) is CommandBatch and batch._device is self:
            if batch._closed:
                raise ClosedError(self.backend, op, "batch")
            return batch
        what = "a batch of another device" if isinstance(batch, CommandBatch) else type(batch).__name__
        raise InvalidArgument(self.backend, op, detail=f"expected a command batch of this device, got {what}")

    def _add(self, batch: CommandBatch, command: Command) -> Command:
        batch.commands.append(command)
        batch._dirty = True
        return command

    def _batch_dispatch(self, batch: CommandBatch, pipeline: Any, buffers: Any, groups: Any,
                        params: Any) -> Command:
        with self._lock:
            self._enter("batch.dispatch")
            self._batch_of(batch, "batch.dispatch")
            command = Command(batch, len(batch.commands), "dispatch")
            self._fill_dispatch(command, pipeline, buffers, groups, params)
            return self._add(batch, command)

    def _fill_dispatch(self, command: Command, pipeline: Any, buffers: Any, groups: Any, params: Any) -> None:
        program, handles, dims, packed = self._checked(pipeline, buffers, groups, params)
        command.program, command.pipeline, command.handles = program, pipeline, list(handles)
        command.dims, command.params = dims, packed
        command.buffers = command._owners = tuple(buffers)

    def _span(self, buffer: BufferHandle, offset: Any, nbytes: Any, op: str, what: str) -> tuple[Any, int, int]:
        """(vendor buffer, offset, nbytes) of a byte range of a batch command: multiples of 4, inside the buffer."""
        handle = self._own(buffer, op)
        if nbytes is None:
            nbytes = buffer.nbytes - (offset if isinstance(offset, int) and not isinstance(offset, bool) else 0)
        for name, value in (("offset", offset), ("nbytes", nbytes)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0 or value % 4:
                raise InvalidArgument(self.backend, op, detail=f"{what} {name} must be an int >= 0 and a multiple "
                                      f"of 4 (what every API copies), got {value!r}")
        offset, nbytes = int(offset), int(nbytes)
        if nbytes == 0 or offset + nbytes > buffer.nbytes:
            raise InvalidArgument(self.backend, op, detail=f"{what} bytes {offset}..{offset + nbytes} are outside "
                                  f"its {buffer.nbytes} bytes (or empty)")
        return handle, offset, nbytes

    def _batch_copy(self, batch: CommandBatch, src: Any, dst: Any, nbytes: Any, src_offset: Any,
                    dst_offset: Any) -> Command:
        with self._lock:
            self._enter("batch.copy")
            self._batch_of(batch, "batch.copy")
            command = Command(batch, len(batch.commands), "copy")
            self._fill_copy(command, src, dst, nbytes, src_offset, dst_offset)
            return self._add(batch, command)

    def _fill_copy(self, command: Command, src: Any, dst: Any, nbytes: Any, src_offset: Any, dst_offset: Any) -> None:
        op = "batch.copy"
        self._own(src, op)
        self._own(dst, op)
        if nbytes is None and isinstance(src_offset, int) and isinstance(dst_offset, int):
            nbytes = min(src.nbytes - src_offset, dst.nbytes - dst_offset)
        s, so, n = self._span(src, src_offset, nbytes, op, "the source's")
        d, do, _ = self._span(dst, dst_offset, n, op, "the destination's")
        if src is dst and so < do + n and do < so + n:
            raise InvalidArgument(self.backend, op, detail=f"bytes {so}..{so + n} and {do}..{do + n} of one buffer "
                                  "overlap; copy through another buffer")
        command.src, command.dst, command.src_offset, command.dst_offset, command.nbytes = s, d, so, do, n
        command._owners = (src, dst)

    def _batch_fill(self, batch: CommandBatch, buffer: Any, value: Any, offset: Any, nbytes: Any) -> Command:
        with self._lock:
            self._enter("batch.fill")
            self._batch_of(batch, "batch.fill")
            command = Command(batch, len(batch.commands), "fill")
            self._fill_fill(command, buffer, value, offset, nbytes)
            return self._add(batch, command)

    def _fill_fill(self, command: Command, buffer: Any, value: Any, offset: Any, nbytes: Any) -> None:
        handle, offset, nbytes = self._span(buffer, offset, nbytes, "batch.fill", "the buffer's")
        raw = dtype_bytes(value, buffer.dtype, self.backend, "batch.fill")
        pattern = (raw * (4 // len(raw)))[:4] if len(raw) <= 4 else raw[:4]
        if len(raw) > 4 and raw != pattern * (len(raw) // 4):
            raise InvalidArgument(self.backend, "batch.fill", detail=f"{value!r} as {buffer.dtype.value} is not a "
                                  "repeated 32-bit pattern; fills write 32-bit words (0 fills anything)")
        command.dst, command.offset, command.nbytes = handle, offset, nbytes
        command.word = int.from_bytes(pattern, "little")
        command._owners = (buffer,)

    def _batch_write(self, batch: CommandBatch, buffer: Any, array: Any, offset: Any) -> Command:
        with self._lock:
            self._enter("batch.write")
            self._batch_of(batch, "batch.write")
            command = Command(batch, len(batch.commands), "write")
            self._fill_write(command, buffer, array, offset)
            return self._add(batch, command)

    def _fill_write(self, command: Command, buffer: Any, array: Any, offset: Any) -> None:
        data = host_buffer(self.backend, array, "batch.write")[0]
        handle, offset, nbytes = self._span(buffer, offset, data.nbytes, "batch.write", "the buffer's")
        command.dst, command.offset, command.nbytes = handle, offset, nbytes
        command.data = flat_bytes(data).copy()
        command._owners = (buffer,)

    def _batch_read(self, batch: CommandBatch, buffer: Any, out: Any, offset: Any) -> Command:
        with self._lock:
            self._enter("batch.read")
            self._batch_of(batch, "batch.read")
            command = Command(batch, len(batch.commands), "read")
            self._fill_read(command, buffer, out, offset)
            batch._reads = True
            return self._add(batch, command)

    def _fill_read(self, command: Command, buffer: Any, out: Any, offset: Any) -> None:
        check_out(self.backend, out, 1 << 62, "batch.read")
        handle, offset, nbytes = self._span(buffer, offset, out.nbytes, "batch.read", "the buffer's")
        command.src, command.offset, command.nbytes = handle, offset, nbytes
        command.out = flat_bytes(out)
        command._owners = (buffer,)

    def _update_command(self, batch: CommandBatch, command: Command, changes: dict[str, Any]) -> None:
        allowed = {"dispatch": ("buffers", "params", "groups"), "copy": ("src", "dst"), "fill": ("value",),
                   "write": ("array",), "read": ("out",)}[command.kind]
        with self._lock:
            op = "Command.update"
            self._enter(op)
            self._batch_of(batch, op)
            if command._batch is not batch or batch.commands[command.index] is not command:
                raise InvalidArgument(self.backend, op, detail="the command is not in this batch")
            unknown = [k for k in changes if k not in allowed]
            if unknown or not changes:
                raise InvalidArgument(self.backend, op, detail=f"a {command.kind} command takes "
                                      f"{', '.join(allowed)}, got {', '.join(unknown) or 'nothing'}")
            fresh = Command(batch, command.index, command.kind)
            if command.kind == "dispatch":
                fresh_buffers = changes.get("buffers", command.buffers)
                self._fill_dispatch(fresh, command.pipeline, fresh_buffers, changes.get("groups", command.dims),
                                    changes["params"] if "params" in changes else command.params)
            elif command.kind == "copy":
                src = changes.get("src", command._owners[0])
                dst = changes.get("dst", command._owners[1])
                self._fill_copy(fresh, src, dst, command.nbytes, command.src_offset, command.dst_offset)
            elif command.kind == "fill":
                self._fill_fill(fresh, command._owners[0], changes["value"], command.offset, command.nbytes)
            elif command.kind == "write":
                data = host_buffer(self.backend, changes["array"], op)[0]
                if data.nbytes != command.nbytes:
                    raise InvalidArgument(self.backend, op, detail=f"the new array holds {data.nbytes} bytes, the "
                                          f"command writes {command.nbytes}")
                self._fill_write(fresh, command._owners[0], data, command.offset)
            else:
                out = changes["out"]
                if not isinstance(out, np.ndarray) or out.nbytes != command.nbytes:
                    raise InvalidArgument(self.backend, op, detail=f"out must be an array of {command.nbytes} bytes")
                self._fill_read(fresh, command._owners[0], out, command.offset)
            for name in Command.__slots__:
                if name not in ("_batch", "index", "kind"):
                    setattr(command, name, getattr(fresh, name))
            if batch._recording is not None and not batch._dirty:
                self._await_batch(batch)  # the recording may be in use by the device
                if not self._update(batch._recording, command.index, command):
                    batch._dirty = True

    def _await_batch(self, batch: CommandBatch) -> None:
        """Wait for the batch's last submission and finish it (its reads and timings)."""
        last = batch._last
        if last is not None:
            queue, serial = last
            self._wait_queue_serial(queue, serial, None, "submit")
            self._settle()

    def _submit_on(self, queue: Queue, batch: Any, wait: Any, signal: Any) -> Submission:
        op = "submit"
        with self._lock:
            self._enter(op)
            self._queue_of(queue, op)
            batch = self._batch_of(batch, op)
            if not batch.commands:
                raise InvalidArgument(self.backend, op, detail="the batch is empty")
            waits = [self._fence_pair(pair, op, "wait") for pair in _pairs(self.backend, wait, op, "wait")]
            signals = [self._fence_pair(pair, op, "signal") for pair in _pairs(self.backend, signal, op, "signal")]
            for fence, value, _ in waits:
                self._check_reachable(fence, value, op)
            seen: dict[int, int] = {}
            for fence, value, _ in signals:
                self._check_signal(fence, value, op)
                if seen.setdefault(id(fence), value) != value:
                    raise InvalidArgument(self.backend, op, detail="one fence signalled twice in one submit")
            for command in batch.commands:
                for owner in command._owners:
                    if owner.handle is None:
                        raise ClosedError(self.backend, op, f"buffer of command {command.index} ({command.kind})")
            if (batch._reads or batch.timestamps or batch._dirty) and batch._last is not None:
                self._await_batch(batch)
            if batch._dirty:
                if batch._recording is not None:
                    old, batch._recording = batch._recording, None
                    self._free_recording(old)
                self._activate()
                batch._recording = self._record(tuple(batch.commands), batch.timestamps)
                batch._dirty = False
            emulated = [(f, v) for f, v, vf in waits + signals if isinstance(vf, EmulatedFence)]
            if emulated and queue is not self._queue:
                raise self._unsupported(op, "fences on several queues")
            self._activate()
            serial = self._submit(queue._vq, batch._recording,
                                  [(vf, v) for _, v, vf in waits if not isinstance(vf, EmulatedFence)],
                                  [(vf, v) for _, v, vf in signals if not isinstance(vf, EmulatedFence)])
            for fence, value, vf in signals:
                if isinstance(vf, EmulatedFence):
                    vf.points.append((value, serial))
                fence._signalled = max(fence._signalled, value)
            batch._last = (queue, serial)
            submission = self.submission_type(self, serial, queue, batch)
            if batch._reads or batch.timestamps:
                self._finishes.append((queue, serial, batch, batch._recording, submission))
            return submission

    def _fence_pair(self, pair: tuple[Any, Any], op: str, what: str) -> tuple[Fence, int, Any]:
        fence, value = pair
        vf = self._fence_of(fence, f"{op} ({what})")
        return fence, fence_value(self.backend, value, op), vf

    def _settle(self) -> None:
        """Finish the submissions known to have finished: their reads' `out` arrays and their timings."""
        if not self._finishes:
            return
        with self._lock:
            keep = []
            for entry in self._finishes:
                queue, serial, batch, rec, submission = entry
                done = self._completed if queue is self._queue else self._done.get(queue.index, 0)
                if serial > done and not self._closed:
                    keep.append(entry)
                    continue
                if self._closed and rec is None:
                    continue
                self._activate()
                self._finish(rec, serial)
                if batch.timestamps and submission is not None:
                    submission._timings = Timings.of(self._timings(rec, serial))
            self._finishes = keep

    def _release_batch(self, batch: CommandBatch) -> None:
        rec, batch._recording = batch._recording, None
        if rec is None or self._closed or self._generation != process._forks:
            return
        with self._lock:
            if self._closed or not self._thread_ok():
                return
            if batch._last is not None:
                self._await_batch(batch)
            self._activate()
            self._free_recording(rec)

    def _submission_timings(self, submission: Submission, timeout: Any) -> Timings:
        batch = submission._batch
        if batch is None or not batch.timestamps:
            raise InvalidState(self.backend, "timings", detail="only a batch made with timestamps=True is timed: "
                               "device.batch(timestamps=True)")
        submission.wait(timeout)
        self._settle()
        found = submission._timings
        if found is None:
            raise InvalidState(self.backend, "timings", detail="the device closed before this submission's timings "
                               "were read")
        return found  # type: ignore[no-any-return]

    # -- memory: kinds, mapping, DLPack ------------------------------------------------------------------

    def _access(self, buffer: BufferHandle) -> tuple[bool, bool]:
        handle = buffer.handle
        if handle is None:
            return False, False
        return self._memory_of(handle)

    def _map_buffer(self, buffer: BufferHandle, write: bool, op: str = "map") -> tuple[np.ndarray, bool]:
        """(typed array over the buffer, persistent) for `map()`, `__array__` and DLPack."""
        with self._lock:
            self._enter(op)
            handle = self._own(buffer, op)
            visible, persistent = self._memory_of(handle)
            if not visible or "map" not in self._features:
                raise InvalidArgument(self.backend, op, detail=f"this buffer ({buffer.memory} memory) is not "
                                      "host-visible; device.download(buffer) copies it to the host, or allocate "
                                      f"it with memory='host' ({', '.join(self._memory_kinds)} here)")
            try:
                dtype = numpy_dtype(buffer.dtype)
            except TypeError as exc:
                raise InvalidArgument(self.backend, op, detail=str(exc)) from None
            self._activate()
            found = self._map(handle, write)
            if isinstance(found, np.ndarray):
                return found[: buffer.nbytes].view(dtype), False
            return self._pinned_view(handle, int(found), buffer.nbytes).view(dtype), True

    def _pinned_view(self, handle: Any, address: int, nbytes: int) -> np.ndarray:
        """A uint8 array over persistently mapped memory that keeps the vendor buffer (and device) alive."""
        owner = (ctypes.c_uint8 * nbytes).from_address(address)
        key = id(handle)
        self._pins[key] = self._pins.get(key, 0) + 1
        weakref.finalize(owner, self._unpin, handle)
        return np.frombuffer(memoryview(owner), np.uint8)  # type: ignore[call-overload]

    def _unpin(self, handle: Any) -> None:
        key = id(handle)
        left = self._pins.get(key, 1) - 1
        if left:
            self._pins[key] = left
            return
        self._pins.pop(key, None)
        if self._generation != process._forks:
            return
        if key in self._pinned_frees:
            pending = self._pinned_frees.pop(key)
            if self._shutdown_pending:
                pass  # the shutdown below frees it with the device
            elif self._owner_thread is None or _get_ident() == self._owner_thread:
                with self._lock:
                    if not self._closed:
                        self._activate()
                        self._free_buffer(pending)
            else:
                self._garbage.append(pending)
        if self._shutdown_pending and not self._pins and (self._owner_thread is None
                                                          or _get_ident() == self._owner_thread):
            self._shutdown_pending = False
            self._shutdown()

    def _unmap_buffer(self, buffer: BufferHandle, array: np.ndarray | None, write: bool) -> None:
        with self._lock:
            handle = buffer.handle
            if handle is None or self._closed:
                return
            self._enter("map")
            self._activate()
            self._unmap(handle, array, write)

    # -- shared machinery -------------------------------------------------------------------------------

    def _enter(self, op: str) -> None:
        """Check the device may run `op` here and now (open, not inherited through fork, right thread)."""
        if self._closed:
            raise ClosedError(self.backend, op, "device")
        if self._generation != process._forks:
            raise process.fork_error(self.backend, op)
        owner = self._owner_thread
        if owner is not None:
            if _get_ident() != owner:
                raise InvalidState(self.backend, op, detail=self._thread_detail())
            self._make_current()  # type: ignore[misc]
        if self._garbage:
            while self._garbage:
                self._free_buffer(self._garbage.popleft())

    def _thread_detail(self) -> str:
        return "this device is used from the thread that opened it"

    def _own(self, buffer: Any, op: str) -> Any:
        """The vendor object of `buffer`, a live buffer of this device."""
        if type(buffer) is self.buffer_type and buffer._device is self:
            handle = buffer.handle
            if handle is not None:
                return handle
            raise ClosedError(self.backend, op, "buffer")
        what = "a buffer of another device" if isinstance(buffer, BufferHandle) else type(buffer).__name__
        raise InvalidArgument(self.backend, op, detail=f"expected a buffer of this device, got {what}")

    def _bind(self, program: Program, buffers: Sequence[Any]) -> list[Any]:
        """The vendor objects of a dispatch's buffers: live buffers of this device, of the element types the
        shader declares, none bound twice (the common case in one pass, anything else by `_handles`)."""
        kind = self.buffer_type
        handles = []
        unbindable = self._unbindable
        for buf, want in zip(buffers, program.interface.elements):
            if type(buf) is not kind or buf._device is not self or buf.handle is None \
                    or (want is not None and buf.dtype is not want) or (unbindable and buf.memory in unbindable):
                return self._handles(program, buffers)
            handles.append(buf.handle)
        n = len(handles)
        if n != len(buffers):  # an interface that does not list every binding
            return self._handles(program, buffers)
        if n > 1 and (buffers[0] is buffers[1] if n == 2 else len(set(map(id, buffers))) < n):
            check_bindings(self.backend, program.interface, buffers)  # read-only aliasing passes
        return handles

    def _handles(self, program: Program, buffers: Sequence[Any]) -> list[Any]:
        """The vendor objects of a dispatch's buffers, every rule checked: ownership, then element types and
        aliasing."""
        handles = [self._own(buf, "dispatch") for buf in buffers]
        check_bindings(self.backend, program.interface, buffers)
        for index, buf in enumerate(buffers):
            if buf.memory in self._unbindable:
                raise InvalidArgument(self.backend, "dispatch", detail=f"buffer {index} is {buf.memory} memory, "
                                      f"which {self.backend} cannot bind in a dispatch; copy it in a batch")
        return handles

    def _program_of(self, pipeline: Any) -> Program:
        if type(pipeline) is self.pipeline_type and pipeline._device is self:
            program = pipeline.program
            if program is None:
                raise ClosedError(self.backend, "dispatch", "pipeline")
            return program
        what = "a pipeline of another device" if isinstance(pipeline, PipelineHandle) else type(pipeline).__name__
        raise InvalidArgument(self.backend, "dispatch", detail=f"expected a pipeline of this device, got {what}")

    def _release_buffer(self, handle: Any) -> None:
        """A buffer was closed: free it now, or at the next call where this thread may not."""
        self._epoch = next(_EPOCHS)  # before the lock: no dispatch takes a binding memo with this buffer now
        lock = self._lock
        lock.acquire()
        try:
            if self._closed or self._generation != process._forks:
                return
            if id(handle) in self._pins:  # arrays over its mapping still live: the last one frees it
                self._pinned_frees[id(handle)] = handle
                return
            owner = self._owner_thread
            if owner is None:
                if not self._recycle(handle):
                    self._free_buffer(handle)
            elif _get_ident() == owner:
                if not self._recycle(handle):
                    self._make_current()  # type: ignore[misc]
                    self._free_buffer(handle)
            else:
                self._garbage.append(handle)
        finally:
            lock.release()

    def _collect(self, handle: Any) -> None:
        """A buffer was garbage-collected unclosed: free it at the device's next call (takes no lock)."""
        self._epoch = next(_EPOCHS)
        if id(handle) in self._pins:
            self._pinned_frees[id(handle)] = handle
        elif not self._closed and self._generation == process._forks:
            self._garbage.append(handle)

    def _wait_serial(self, serial: int, timeout: Any, op: str = "wait") -> None:
        if timeout is None and serial <= self._completed:
            return
        wait_for(self.backend, op, lambda seconds: self._block(serial, seconds, op), timeout)

    def _serial_done(self, serial: int) -> bool:
        return serial <= self._completed or self._block(serial, 0.0, "done")

    def _block(self, serial: int, seconds: float | None, op: str) -> bool:
        with self._lock:
            if self._closed:
                return True  # closing waited for (or, after a fork, abandoned) all of it
            if self._generation != process._forks:
                raise process.fork_error(self.backend, op)
            if not self._thread_ok():
                raise InvalidState(self.backend, op, detail=self._thread_detail())
            if serial <= self._completed:
                return True
            self._activate()
            return self._wait(serial, seconds)


_U64 = (1 << 64) - 1
_KDLCPU = 1
_DLPACK_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan", 8: "kDLMetal",
                 9: "kDLVPI", 10: "kDLROCM", 11: "kDLROCMHost", 12: "kDLExtDev", 13: "kDLCUDAManaged",
                 14: "kDLOneAPI", 15: "kDLWebGPU", 16: "kDLHexagon"}
#: What to say where a backend lacks a memory kind for a reason of its API.
_KIND_NOTES = {("webgpu", "host"): ": WebGPU forbids a buffer that is both mappable and a storage buffer; use "
                                   "memory='upload' or 'readback' and copy in a batch"}


def _dlpack_device(obj: Any, backend: str = "compute") -> tuple[int, int]:
    try:
        kind, ordinal = obj.__dlpack_device__()
        return int(kind), int(ordinal)
    except AttributeError:
        raise InvalidArgument(backend, "from_dlpack", detail=f"{type(obj).__name__} is not a DLPack producer "
                              "(no __dlpack_device__)") from None
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(backend, "from_dlpack", detail=f"__dlpack_device__ gave no (type, id): {exc}") from None


def _pairs(backend: str, pairs: Any, op: str, what: str) -> list[tuple[Any, Any]]:
    """`wait=` / `signal=` as a list of (fence, value) pairs."""
    if isinstance(pairs, tuple) and len(pairs) == 2 and isinstance(pairs[0], Fence):
        pairs = [pairs]
    try:
        found = list(pairs)
    except TypeError:
        raise InvalidArgument(backend, op, detail=f"{what}= takes (fence, value) pairs, got {pairs!r}") from None
    for pair in found:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise InvalidArgument(backend, op, detail=f"{what}= takes (fence, value) pairs, got {pair!r}")
    return found


def _settle_params(program: Program, wanted: int | None) -> None:
    """Which params rule the program's dispatches follow: its reflected block (when `params` was "auto" or agrees
    with the block's field count) or N 32-bit words."""
    block: ParamBlock | None = program.interface.params
    if block is not None and (wanted is None or wanted == len(block.fields)):
        program.block = block
        program.params = len(block.fields)
    elif wanted is None:
        program.params = program.params or 0
