"""`ExecutionModel`: the execution model of a ComputeDevice (plugin contract 1.2), written once.

Queues, fences, command batches and their timings, memory kinds and
mapping, DLPack and external memory and fences: every public method and
every check, over optional vendor calls that raise `Unsupported` until a
backend provides them (the vendor calls are listed in `base`'s docstring).
`ComputeDeviceBase` inherits it; a device that cannot subclass the base
(CUDA's `Device`, which is also the whole CUDA API) inherits it alone and
provides what it needs from its host class:

    backend, descriptor, max_buffer_bytes, buffer_limit_name, submission_type
    _lock (reentrant), _closed, _generation, _owner_thread, _garbage, _submitted, _completed
    _enter(op), _activate(), _thread_ok(), _own(buffer, op) -> vendor buffer, _free_buffer(handle), _shutdown()
    _checked(pipeline, buffers, groups, params) -> (program, vendor buffers, dims, packed params)
    _wait(serial, seconds), _wait_serial(serial, timeout, op), _serial_done(serial)
    upload(array), dispatch(pipeline, buffers, groups, params), _wrap_buffer(handle, dtype, size)

and calls `_open_execution(features, memory_kinds)` once its state exists.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from ..errors import ClosedError, InvalidArgument, InvalidState, Timeout, Unsupported
from ..types import DType
from . import process
from .checks import check_out, element_count, element_type, host_buffer, numpy_dtype
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
    close_duplicate,
    dtype_bytes,
    fence_value,
)
from .handles import BufferHandle, Submission, wait_for

__all__ = ["ExecutionModel"]

_get_ident = threading.get_ident


def flat_bytes(array: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a C-contiguous array (the array itself where it is one)."""
    if array.ndim == 1:
        return array if array.dtype == np.uint8 else array.view(np.uint8)
    return array.reshape(-1).view(np.uint8)


class ExecutionModel:
    """Queues, fences, batches, timings, memory kinds, mapping, DLPack and interop over vendor calls."""

    #: The execution-model features this backend provides (see `execution.FEATURES`); `_open(features=)` may
    #: narrow them per device.
    execution_features: ClassVar[frozenset[str]] = frozenset()
    #: Memory kinds `alloc(memory=)` takes on this backend ("device" always; `_open(memory_kinds=)` may narrow them
    #: per device), and those a dispatch may bind.
    supported_memory: ClassVar[tuple[str, ...]] = ("device",)
    bindable_memory: ClassVar[tuple[str, ...]] = MEMORY_KINDS

    # What the host class provides (see the module docstring).
    backend: ClassVar[str]
    submission_type: ClassVar[type[Submission]]
    descriptor: Any
    max_buffer_bytes: int
    buffer_limit_name: ClassVar[str]
    _lock: Any
    _closed: bool
    _generation: int
    _owner_thread: int | None
    _garbage: Any
    _submitted: int
    _completed: int

    def _open_execution(self, features: Any = None, memory_kinds: Sequence[str] | None = None) -> None:
        """Set up the execution model's state (the host class's `_open` calls it)."""
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
        self._queue = Queue(self, None, 0, 0)  # type: ignore[arg-type]
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

    # -- what the host class provides (the compute kit's ComputeDeviceBase has them all) ------------------

    def _enter(self, op: str) -> None:
        raise NotImplementedError

    def _activate(self) -> None:
        raise NotImplementedError

    def _keep_current(self) -> contextlib.AbstractContextManager[Any]:
        """Vendor hook: around cleanup that a finalizer may run in the middle of another device's call on this
        thread (a fence, batch or mapped buffer collected there), keep what was current before it current after.
        A backend whose context is per thread (OpenGL's EGL) saves and restores it; others need nothing."""
        return contextlib.nullcontext()

    def _thread_ok(self) -> bool:
        raise NotImplementedError

    def _own(self, buffer: Any, op: str) -> Any:
        raise NotImplementedError

    def _checked(self, pipeline: Any, buffers: Any, groups: Any, params: Any) -> tuple[Any, list[Any],
                                                                                      tuple[int, int, int], Any]:
        raise NotImplementedError

    def _wait(self, serial: int, seconds: float | None) -> bool:
        raise NotImplementedError

    def _wait_serial(self, serial: int, timeout: Any, op: str = "wait") -> None:
        raise NotImplementedError

    def _serial_done(self, serial: int) -> bool:
        raise NotImplementedError

    def _free_buffer(self, handle: Any) -> None:
        raise NotImplementedError

    def _shutdown(self) -> None:
        raise NotImplementedError

    def _launch(self, program: Any, handles: list[Any], dims: tuple[int, int, int], params: Any) -> int:
        raise NotImplementedError

    def upload(self, array: Any) -> Any:
        """Copy a host array into a new buffer (the ComputeDevice call); a backend implements it."""
        raise NotImplementedError

    def dispatch(self, pipeline: Any, buffers: Any, groups: Any, params: Any = ()) -> Any:
        """Queue one dispatch of `pipeline` over `buffers` on the default queue (the ComputeDevice call); a backend
        implements it."""
        raise NotImplementedError

    def _wrap_buffer(self, handle: Any, dtype: DType, size: int) -> Any:
        """A buffer object over a vendor buffer the execution model made (an import, another memory kind)."""
        raise NotImplementedError

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

    def _export_memory(self, handle: Any) -> tuple[int, int] | tuple[int, int, bool]:
        """(fd, bytes) or (fd, bytes, dedicated): the fd of `handle`'s memory; dedicated (default True) says
        whether the allocation was a dedicated one (a Vulkan importer must then ask for one too)."""
        raise self._unsupported("export_memory", "export_memory")

    def _import_memory(self, fd: int, nbytes: int, dtype: DType, ext: ExternalMemory) -> Any:
        raise self._unsupported("import_memory", "import_memory")

    def _export_fence(self, vf: Any) -> int:
        raise self._unsupported("export_fence", "export_fence")

    def _import_fence(self, fd: int) -> Any:
        raise self._unsupported("import_fence", "import_fence")


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
            return self._wrap_buffer(handle, dt, size)

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
            exported = self._export_memory(handle)
            fd, nbytes = exported[0], exported[1]
            dedicated = bool(exported[2]) if len(exported) > 2 else True
            return ExternalMemory(fd, nbytes, backend=self.backend, dedicated=dedicated)

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
                close_duplicate(fd, memory.fd)  # some drivers (GL, NVIDIA's Vulkan) close it even when refusing
                raise
            return self._wrap_buffer(handle, dt, size)

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
                close_duplicate(fd, fence.fd)
                raise
            imported = Fence(self, vf, 0, False)
            imported._signalled = _U64
            return imported

    @property
    def _real_fences(self) -> bool:
        return type(self)._create_fence is not ExecutionModel._create_fence

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
        with self._lock, self._keep_current():
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
        command.dims, command.params, command._given = dims, packed, params
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
                                    changes["params"] if "params" in changes else command._given)
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
            with self._keep_current():
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

    def _map_buffer(self, buffer: Any, write: bool, op: str = "map") -> tuple[np.ndarray, bool]:
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
                with self._lock, self._keep_current():
                    if not self._closed:
                        self._activate()
                        self._free_buffer(pending)
            else:
                self._garbage.append(pending)
        if self._shutdown_pending and not self._pins and (self._owner_thread is None
                                                          or _get_ident() == self._owner_thread):
            self._shutdown_pending = False
            with self._lock, self._keep_current():
                self._activate()
                self._shutdown()

    def _unmap_buffer(self, buffer: BufferHandle, array: np.ndarray | None, write: bool) -> None:
        with self._lock:
            handle = buffer.handle
            if handle is None or self._closed:
                return
            self._enter("map")
            self._activate()
            self._unmap(handle, array, write)


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
        buf = self._wrap_buffer(self._create_memory(size * dt.itemsize, dt, memory, exportable), dt, size)
        buf.memory = memory
        buf.exportable = exportable
        return buf



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

