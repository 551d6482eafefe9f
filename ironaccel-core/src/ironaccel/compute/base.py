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
release() in try/finally, which costs less on an RLock than `with` does.
Every call runs the checks in `_enter`; they are attribute tests only, since
they are paid on every dispatch.
"""

from __future__ import annotations

import dataclasses
import itertools
import struct
import threading
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ..errors import ClosedError, InvalidArgument, InvalidState
from ..types import DeviceDescriptor, DType
from . import process
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
from .execution import (
    MEMORY_KINDS,
    constants_key,
)
from .handles import _ITEMSIZE, BufferHandle, PipelineHandle, Program, ProgramCache, Submission, wait_for
from .model import ExecutionModel
from .params import ParamBlock
from .shaders import check_bindings, source_text
from .sources import settle, translate

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


class ComputeDeviceBase(ExecutionModel):
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
    #: uint8 view of it (a view would be built on every upload or download).
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
        self._open_execution(features, memory_kinds)

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

    def _compile(self, code: Any, entry: str, buffers: int, params: int | None, workgroup_size: tuple[int, int, int],
                 constants: dict[str | int, Any]) -> Program:
        """Compile with constants; `params` None: as many as the code declares.  The default takes neither."""
        if constants:
            raise self._unsupported("pipeline", "constants")
        return self._build(code, entry, buffers, 0 if params is None else params, workgroup_size)

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

    # -- the protocol -----------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether `close()` was called; every call after it raises ClosedError."""
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
        `code` may also be a source object (`ironaccel.compute.sources`; e.g. `ironaccel_slang.Slang`), translated
        for this device: its interface, params block and workgroup size are then the translator's.
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
            foreign = translate(backend, self, code, entry, dict(fixed), buffers)  # a source object (Slang)
            named = entry
            if foreign is not None:
                code, entry, fixed = foreign.code, foreign.entry, ()
                wanted = foreign.params if wanted is None else wanted
                size = foreign.workgroup_size or size
            if fixed and "constants" not in self._features:
                raise self._unsupported("pipeline", "constants")
            prepared, code_key = self._prepare(code, entry)
            key = (code_key, entry, buffers, wanted, size, fixed, None if foreign is None else foreign.key)
            program = self._programs.get(key)
            if program is None:
                program = self._compile(prepared, entry, buffers, wanted, size, dict(fixed))
                program.workgroup_size = size
                if foreign is not None:
                    try:
                        settle(program, foreign)
                    except BaseException:
                        program.release()
                        raise
                _settle_params(program, wanted)
                self._programs.add(key, program)
            return self.pipeline_type(self, program, named, size)

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
            # Tried: object.__new__ and the two fields set here instead of Submission.__init__ (a little faster
            # alone): no change measurable in a dispatch (webgpu).
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
        # (Spelled out for one and two buffers: tuple(map(id, ...)) takes several times as long.)
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

    def _wrap_buffer(self, handle: Any, dtype: DType, size: int) -> BufferHandle:
        return self.buffer_type(self, handle, dtype, size)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.descriptor.ordinal}: {self.descriptor.name}" \
               f"{' closed' if self._closed else ''}>"

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


def _settle_params(program: Program, wanted: int | None) -> None:
    """Which params rule the program's dispatches follow: its reflected block (when `params` was "auto" or agrees
    with the block's field count) or N 32-bit words."""
    block: ParamBlock | None = program.interface.params
    if block is not None and (wanted is None or wanted == len(block.fields)):
        program.block = block
        program.params = len(block.fields)
    elif wanted is None:
        program.params = program.params or 0
