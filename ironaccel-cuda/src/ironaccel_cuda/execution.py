"""The compute kit's execution model (`ironaccel.compute.model.ExecutionModel`) on a CUDA Device.

Core's `ExecutionModel` holds every public method and check; this module is
its vendor hooks in CUDA driver terms:

* a queue is a CUDA stream created with a priority (cuCtxGetStreamPriorityRange
  bounds it); each submission's serial is an event recorded after it, so a
  host wait is cuEventSynchronize (or a poll of cuEventQuery under a timeout);
* a fence is a timeline emulated over events, one per signalled value: a host
  wait synchronizes the first event at or past the value, a queue wait is
  cuStreamWaitEvent (the host is not involved);
* a command batch is replayed in order on the queue's stream at each submit
  (kernel launches, cuMemcpyDtoDAsync, cuMemsetD32Async, host copies), so an
  updated command needs no re-recording; with timestamps every command sits
  between two timing events and its span is cuEventElapsedTime in ns.

The host-class state `ExecutionModel` reads is made on first use (`__getattr__`),
so opening a Device and its hot paths pay nothing for it.
"""

from __future__ import annotations

import ctypes
import struct
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.compute import Submission, process, wait_for
from ironaccel.compute.execution import Command
from ironaccel.compute.model import ExecutionModel

from . import _core, interop
from ._driver import call
from .errors import BACKEND


class _Packed(tuple):  # type: ignore[type-arg]
    """A dispatch's param values as the kernel receives them, and the pipeline's block (a queue launch gets the
    program, not the pipeline); a tuple, so a batch command's params re-check like the values they are."""

    block: tuple[int, int, int]

    def __new__(cls, block: tuple[int, int, int], values: Sequence[Any]) -> _Packed:
        packed = super().__new__(cls, values)
        packed.block = block
        return packed


class _Raw(bytes):
    """A typed params block packed as the kernel's parameter buffer lays it out, and the pipeline's block; bytes,
    so a batch command's params re-check as a block's bytes."""

    block: tuple[int, int, int]

    def __new__(cls, block: tuple[int, int, int], raw: bytes) -> _Raw:
        packed = super().__new__(cls, raw)
        packed.block = block
        return packed


class _BlockLaunch:
    """One program's typed-block launch, set up once: a C argument area (the buffers' pointers, then the packed
    block) and the void* array into it.  A launch fills the area with one pack under a lock and calls
    cuLaunchKernel, which copies the arguments before it returns, so the area is free again at once."""

    __slots__ = ("block", "lock", "area", "view", "fill", "argv", "address")

    def __init__(self, buffers: int, block: Any):
        self.block = block
        size = 8 * buffers + block.size
        self.lock = threading.Lock()
        self.area = bytearray(max(8, size))
        self.view = (ctypes.c_char * len(self.area)).from_buffer(self.area)  # pins the area's address
        self.fill = struct.Struct(f"<{buffers}Q{block.size}s")
        base = ctypes.addressof(self.view)
        slots = [base + 8 * i for i in range(buffers)] + [base + 8 * buffers + f.offset for f in block.fields]
        self.argv = (ctypes.c_void_p * max(1, len(slots)))(*slots)
        self.address = ctypes.addressof(self.argv)

    def __call__(self, h: int, grid: tuple[int, int, int], buffers: Sequence[Any], params: Any, stream: Any) -> None:
        (bx, by, bz), (gx, gy, gz) = params.block, grid
        s = stream._h
        if s is _core.CLOSED:
            stream.handle  # noqa: B018  (raises the closed-stream error)
        with self.lock:
            self.fill.pack_into(self.area, 0, *[b._dp for b in buffers], params)
            _core.launch(h, gx, gy, gz, bx, by, bz, 0, s, self.address)


def run(program: Any, grid: tuple[int, int, int], buffers: Sequence[Any], params: Any, stream: Any) -> None:
    """Launch `program` on `stream` : positional values through Function.launch, a
    typed block through the program's `_BlockLaunch` (cuLaunchKernel with each argument's pointer into it)."""
    if type(params) is not _Raw:
        program.function.launch(grid, params.block, *buffers, *params, stream=stream)
        return
    h = program.function._h
    if type(h) is not int:
        h = int(getattr(h, "_h", h))
    launch = program.block_launch
    if launch is None or launch.block is not program.block:  # the kit may give a program its block after loading
        launch = program.block_launch = _BlockLaunch(program.buffers, program.block)
    launch(h, grid, buffers, params, stream)


__all__ = ["CudaExecution", "MAX_QUEUES"]

#: Queues a device offers, the default one included.  CUDA streams are cheap, but the driver maps them onto
#: CUDA_DEVICE_MAX_CONNECTIONS hardware work queues (8 by default): past that, two streams share one hardware
#: queue and their work serializes falsely, so a ninth queue would promise concurrency it does not have.
MAX_QUEUES = 8
_POLL = 50e-6

#: The state `ExecutionModel` reads from its host class, made by `_execution_state` on first use.
_LAZY = frozenset({"_lock", "_generation", "_owner_thread", "_garbage", "_submitted", "_completed", "_features",
                   "_memory_kinds", "_unbindable", "_queue", "_queues", "_done", "_finishes", "_pins",
                   "_pinned_frees", "_shutdown_pending", "_dq", "max_buffer_bytes"})

_REASONS = {
    "export_fence": "CUDA cannot export a semaphore as an fd (its events are process-local): create the "
                    "exportable fence on the Vulkan side and import_fence() it here",
}


class _Queue:
    """A stream and the events that mark its submissions (serial -> event)."""

    __slots__ = ("stream", "serial", "completed", "events", "permanent")

    def __init__(self, stream: Any, permanent: bool):
        self.stream = stream
        self.serial = 0
        self.completed = 0
        self.events: dict[int, Any] = {}
        self.permanent = permanent

    def mark(self, device: Any) -> int:
        """Record an event after everything queued so far: the next serial."""
        event = device.create_event()
        self.stream.record(event)
        self.serial += 1
        self.events[self.serial] = event
        return self.serial

    def wait(self, serial: int, seconds: float | None) -> bool:
        if serial <= self.completed:
            return True
        marks = [s for s in self.events if s >= serial]
        if not marks:  # a serial never handed out: nothing to wait for
            return True
        event = self.events[min(marks)]
        if seconds is None:
            event.synchronize()
        else:
            deadline = time.monotonic() + seconds
            while not event.query():
                if time.monotonic() >= deadline:
                    return False
                time.sleep(_POLL)
        done = min(marks)
        self.completed = max(self.completed, done)
        for s in [s for s in self.events if s <= done]:
            self.events.pop(s).close()
        return True

    def close(self) -> None:
        for event in self.events.values():
            event.close()
        self.events.clear()
        if not self.permanent:
            self.stream.close()


class _Fence:
    """A timeline over events: (value, event) per signal, and the value it started at."""

    __slots__ = ("base", "points")

    def __init__(self, value: int):
        self.base = value
        self.points: list[tuple[int, Any]] = []

    def reached(self) -> int:
        """The highest value whose signal has run (retiring the events behind it)."""
        done = [i for i, (_, event) in enumerate(self.points) if event.query()]
        if done:
            last = max(done)
            self.base = max(self.base, self.points[last][0])
            for _, event in self.points[: last + 1]:
                event.close()
            del self.points[: last + 1]
        return self.base

    def event_for(self, value: int) -> Any:
        for v, event in self.points:
            if v >= value:
                return event
        return None

    def close(self) -> None:
        for _, event in self.points:
            event.close()
        self.points.clear()


class _Recording:
    """A batch's commands, replayed at each submit; per serial: staging of its reads, its timing events."""

    __slots__ = ("commands", "timestamps", "reads", "spans")

    def __init__(self, commands: Sequence[Command], timestamps: bool):
        self.commands = commands
        self.timestamps = timestamps
        self.reads: dict[int, list[tuple[Command, np.ndarray]]] = {}
        self.spans: dict[int, list[tuple[Any, Any]]] = {}


class _Holder:
    """Closes the queues' streams and events with the Device handle (`Device.close` closes its pools)."""

    def __init__(self, device: Any):
        self.device = device

    def close(self) -> None:
        device, self.device = self.device, None
        if device is None or process._forks != device.__dict__.get("_generation", process._forks):
            return
        for queue in device.__dict__.get("_queues", ()):
            vq = queue._vq
            if vq is not None:
                vq.close()
        device.__dict__["_dq"].close()


class QueueSubmission(Submission):
    """Work on a queue or a submitted batch: the kit's serial-based submission (waits, timings)."""

    __slots__ = ()


class CudaExecution(ExecutionModel):
    """The vendor hooks of `ExecutionModel` over streams, events and stream-ordered copies."""

    backend = BACKEND
    submission_type = QueueSubmission
    buffer_limit_name = "the device's memory"

    execution_features = frozenset({"queues", "fences", "batches", "timestamps", "typed_params", "constants", "map",
                                    "dlpack", "export_memory", "import_memory", "import_fence"})
    supported_memory = ("device", "host")
    bindable_memory = ("device", "host")

    # -- the host-class state, made on first use -------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        if name in _LAZY and "_dq" not in self.__dict__:
            self._execution_state()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _execution_state(self) -> None:
        d = self.__dict__
        d["_lock"] = threading.RLock()
        d["_generation"] = process._forks
        d["_owner_thread"] = None
        d["_garbage"] = []
        d["_submitted"] = d["_completed"] = 0
        d["max_buffer_bytes"] = int(self._state.total_memory)  # type: ignore[attr-defined]
        d["_dq"] = _Queue(self._state.default_stream, permanent=True)  # type: ignore[attr-defined]
        features, kinds = set(self.execution_features), ["device", "host"]
        why = d["_why"] = {}
        if not self._state.attributes.can_map_host_memory:  # type: ignore[attr-defined]
            features -= {"map", "dlpack"}
            kinds.remove("host")
            why["map"] = why["dlpack"] = f"cuda:{self.ordinal} cannot map host memory (CAN_MAP_HOST_MEMORY is 0)"  # type: ignore[attr-defined]
        from .driver_pool import device_attribute

        if not (device_attribute(self, "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED")  # type: ignore[arg-type]
                and device_attribute(self, "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED")):  # type: ignore[arg-type]
            features.discard("export_memory")
            why["export_memory"] = (f"cuda:{self.ordinal} has no virtual memory management with POSIX fd handles "  # type: ignore[attr-defined]
                                    "(cuMemCreate / cuMemExportToShareableHandle)")
        self._open_execution(features, tuple(kinds))
        self._pools.append(_Holder(self))  # type: ignore[attr-defined]

    def _enter(self, op: str) -> None:
        self._compute_check(op)  # type: ignore[attr-defined]

    def _activate(self) -> None:
        self._bind_here()  # type: ignore[attr-defined]

    def _thread_ok(self) -> bool:
        return True  # a CUDA context is usable from any thread

    def _free_buffer(self, handle: Any) -> None:
        pass  # a DeviceBuf frees itself

    def _shutdown(self) -> None:
        pass

    def _wrap_buffer(self, handle: Any, dtype: Any, size: int) -> Any:
        return handle  # the memory hooks make DeviceBufs already

    def _unsupported_reason(self, feature: str) -> str:
        found = self.__dict__.get("_why", {}).get(feature) or _REASONS.get(feature)
        return found or super()._unsupported_reason(feature)

    # -- memory kinds, mapping, DLPack, external memory (interop) --------------------------------------------

    def _create_memory(self, nbytes: int, dtype: Any, memory: str, exportable: bool) -> Any:
        return interop.create_memory(self, nbytes, dtype, memory, exportable)

    def _memory_of(self, handle: Any) -> tuple[bool, bool]:
        host = handle.memory == "host"
        return host, host

    def _map(self, handle: Any, write: bool) -> Any:
        self._sync_all()  # a mapping is ordered after the work already queued
        return interop.host_array(handle)  # mapped for the buffer's life: the array keeps the memory alive

    def _unmap(self, handle: Any, array: Any, write: bool) -> None:
        pass  # the array is the memory itself

    def _sync_all(self) -> None:
        _core.stream_sync(self._state.default_stream._h)  # type: ignore[attr-defined]
        for queue in self._queues[1:]:
            if not queue._closed:
                queue._vq.stream.synchronize()

    def _import_dlpack(self, obj: Any) -> tuple[Any, Any, int]:
        return interop.import_dlpack(self, obj)

    def _export_memory(self, handle: Any) -> tuple[int, int, bool]:
        return interop.export_memory(self, handle)

    def _import_memory(self, fd: int, nbytes: int, dtype: Any, ext: Any) -> Any:
        return interop.import_memory(self, fd, nbytes, dtype, ext)

    def _import_fence(self, fd: int) -> Any:
        return interop.import_fence(self, fd)

    # -- serials of the default queue ------------------------------------------------------------------

    def _vq(self, vq: Any) -> _Queue:
        return self._dq if vq is None else vq  # type: ignore[no-any-return]

    def _sync_default(self) -> None:
        d = self.__dict__
        d["_submitted"], d["_completed"] = self._dq.serial, self._dq.completed

    def _wait(self, serial: int, seconds: float | None) -> bool:
        found = self._dq.wait(serial, seconds)
        self._sync_default()
        return found

    def _wait_serial(self, serial: int, timeout: Any, op: str = "wait") -> None:
        wait_for(BACKEND, op, lambda seconds: self._locked_wait(None, serial, seconds), timeout)

    def _locked_wait(self, vq: Any, serial: int, seconds: float | None) -> bool:
        with self._lock:
            if self._closed:
                return True
            self._activate()
            found = self._vq(vq).wait(serial, seconds)
            self._sync_default()
            return found

    def _serial_done(self, serial: int) -> bool:
        return self._locked_wait(None, serial, 0.0)

    # -- queues ---------------------------------------------------------------------------------------

    def _queue_limit(self) -> int:
        return MAX_QUEUES

    def _create_queue(self, priority: int) -> tuple[_Queue, int]:
        least, greatest = self.stream_priority_range  # type: ignore[attr-defined]
        cuda = min(max(-priority, greatest), least)  # CUDA: lower numbers are more urgent
        return _Queue(self.create_stream(priority=cuda), permanent=False), -cuda  # type: ignore[attr-defined]

    def _destroy_queue(self, vq: _Queue) -> None:
        vq.close()

    def _launch_on(self, vq: Any, program: Any, handles: list[Any], dims: tuple[int, int, int], params: Any) -> int:
        q = self._vq(vq)
        run(program, dims, handles, params, q.stream)
        serial = q.mark(self)
        self._sync_default()
        return serial

    def _launch(self, program: Any, handles: list[Any], dims: tuple[int, int, int], params: Any) -> int:
        return self._launch_on(None, program, handles, dims, params)

    def _wait_on(self, vq: Any, serial: int, seconds: float | None) -> bool:
        found = self._vq(vq).wait(serial, seconds)
        self._sync_default()
        return found

    def _last_serial(self, vq: Any) -> int:
        if self._closed:
            return self._vq(vq).serial
        self._activate()
        serial = self._vq(vq).mark(self)  # also orders the dispatches that carry no serial (Device.dispatch)
        self._sync_default()
        return serial

    # -- fences ---------------------------------------------------------------------------------------

    def _create_fence(self, value: int, exportable: bool) -> _Fence:
        return _Fence(value)

    def _destroy_fence(self, vf: Any) -> None:
        vf.close()

    def _fence_value(self, vf: Any) -> int:
        if type(vf) is not _Fence:
            return vf.value()  # type: ignore[no-any-return]
        return vf.reached()

    def _fence_wait(self, vf: Any, value: int, seconds: float | None) -> bool:
        if type(vf) is not _Fence:
            return vf.wait(value, seconds)  # type: ignore[no-any-return]
        if value <= vf.reached():
            return True
        event = vf.event_for(value)
        if event is None:  # not signalled yet: a bounded wait looks again shortly
            if seconds:
                time.sleep(min(seconds, 0.001))
            return False
        if seconds is None:
            event.synchronize()
        else:
            deadline = time.monotonic() + seconds
            while not event.query():
                if time.monotonic() >= deadline:
                    return False
                time.sleep(_POLL)
        vf.reached()
        return True

    def _signal(self, vq: Any, vf: Any, value: int) -> None:
        if type(vf) is not _Fence:
            vf.signal(self._vq(vq).stream, value)
            return
        event = self.create_event()  # type: ignore[attr-defined]
        self._vq(vq).stream.record(event)
        vf.points.append((value, event))

    def _wait_fence(self, vq: Any, vf: Any, value: int) -> None:
        if type(vf) is not _Fence:
            vf.wait_on(self._vq(vq).stream, value)
            return
        event = vf.event_for(value)
        if event is not None:  # else reached already (the kit refuses a value nothing will signal)
            self._vq(vq).stream.wait(event)

    # -- batches --------------------------------------------------------------------------------------

    def _record(self, commands: Sequence[Command], timestamps: bool) -> _Recording:
        return _Recording(commands, timestamps)

    def _update(self, rec: _Recording, index: int, command: Command) -> bool:
        return True  # a replay reads each command's fields as they are at submit

    def _submit(self, vq: Any, rec: _Recording, waits: list[tuple[Any, int]],
                signals: list[tuple[Any, int]]) -> int:
        q = self._vq(vq)
        stream = q.stream
        h = int(stream.handle)
        for vf, value in waits:
            self._wait_fence(vq, vf, value)
        reads: list[tuple[Command, np.ndarray]] = []
        spans: list[tuple[Any, Any]] = []
        for command in rec.commands:
            if rec.timestamps:
                start, end = self.create_event(timing=True), self.create_event(timing=True)  # type: ignore[attr-defined]
                stream.record(start)
            kind = command.kind
            if kind == "dispatch":
                run(command.program, command.dims, command.handles, command.params, stream)
            elif kind == "copy":
                call("cuMemcpyDtoDAsync", command.dst._dp + command.dst_offset, command.src._dp + command.src_offset,
                     command.nbytes, h)
            elif kind == "fill":
                call("cuMemsetD32Async", command.dst._dp + command.offset, command.word, command.nbytes // 4, h)
            elif kind == "write":
                _core.memcpy_htod(command.dst._dp + command.offset, command.data, command.nbytes, h)
            else:  # read: into staging, delivered to `out` once the submission has finished (_finish)
                staging = np.empty(command.nbytes, np.uint8)
                _core.memcpy_dtoh(staging, command.src._dp + command.offset, command.nbytes, h)
                reads.append((command, staging))
            if rec.timestamps:
                stream.record(end)
                spans.append((start, end))
        for vf, value in signals:
            self._signal(vq, vf, value)
        serial = q.mark(self)
        self._sync_default()
        if reads:
            rec.reads[serial] = reads
        if spans:
            rec.spans[serial] = spans
        return serial

    def _finish(self, rec: _Recording, serial: int) -> None:
        for command, staging in rec.reads.pop(serial, ()):
            out = command.out
            assert out is not None  # a read command always has its out array
            out[:] = staging

    def _timings(self, rec: _Recording, serial: int) -> list[tuple[float, float]]:
        spans = rec.spans.pop(serial, [])
        if not spans:
            return []
        origin = spans[0][0]
        found = [(start.elapsed_ms(origin) * 1e6, end.elapsed_ms(origin) * 1e6) for start, end in spans]
        for start, end in spans:
            start.close()
            end.close()
        return found

    def _free_recording(self, rec: _Recording) -> None:
        for spans in rec.spans.values():
            for start, end in spans:
                start.close()
                end.close()
        rec.spans.clear()
        rec.reads.clear()
