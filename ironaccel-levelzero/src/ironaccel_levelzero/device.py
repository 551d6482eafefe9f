"""A Level Zero ComputeDevice on the compute kit: a context, a compute command queue, device memory (USM),
SPIR-V modules and kernels.

Each submission is a command list recorded, closed and executed on the queue with a fence of its own; a
serial's fence says when it finished.  Uploads and downloads are memory copies on the same in-order queue,
so they follow earlier kernels.  Code is SPIR-V for OpenCL-style kernels (Kernel capability): the kernel is
found by its entry-point name (zeKernelCreate), its buffers are pointer arguments and its params are 32-bit
scalar arguments, in order (zeKernelSetArgumentValue), and the pipeline's workgroup size is the kernel's
group size (zeKernelSetGroupSize).  Kernel arguments are captured when a launch is appended, so one kernel
object serves every launch.
"""

from __future__ import annotations

import ctypes
from collections.abc import Hashable
from typing import Any

import numpy as np

from ironaccel.compute import BufferHandle, ComputeDeviceBase, PipelineHandle, Program, Submission
from ironaccel.errors import CompileError, InvalidArgument
from ironaccel.types import DeviceDescriptor, DType

from . import api
from .loader import BACKEND, check

_c = ctypes
SPIRV_MAGIC = 0x07230203


class LevelZeroBuffer(BufferHandle):
    __slots__ = ()


class LevelZeroPipeline(PipelineHandle):
    __slots__ = ()


class LevelZeroSubmission(Submission):
    __slots__ = ()


class Memory:
    """A USM allocation: its pointer and size."""

    __slots__ = ("ptr", "nbytes", "kind", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, kind: str = "device"):
        self.ptr, self.nbytes, self.kind = ptr, nbytes, kind


class KernelProgram(Program):
    """A module and the kernel of one entry point."""

    def __init__(self, device: LevelZeroDevice, module: int, kernel: int, buffers: int, params: int):
        super().__init__(buffers, params)
        self._device, self.module, self.kernel = device, module, kernel

    def release(self) -> None:
        if self.released:
            return
        super().release()
        self._device._destroy_kernel(self)


def spirv_bytes(code: Any, op: str = "pipeline") -> bytes:
    """SPIR-V as bytes (bytes, bytearray, memoryview or a uint32 array); InvalidArgument for anything else."""
    if isinstance(code, np.ndarray):
        if code.dtype != np.uint32 or code.ndim != 1:
            raise InvalidArgument(BACKEND, op, detail=f"SPIR-V as an array must be 1-D uint32, got {code.dtype} "
                                  f"with {code.ndim} dimensions")
        raw = np.ascontiguousarray(code).tobytes()
    elif isinstance(code, (bytes, bytearray, memoryview)):
        raw = bytes(code)
    else:
        raise InvalidArgument(BACKEND, op, detail=f"Level Zero code is SPIR-V (bytes), got {type(code).__name__}")
    if len(raw) < 20 or len(raw) % 4:
        raise InvalidArgument(BACKEND, op, detail=f"SPIR-V is whole 32-bit words, at least 5; got {len(raw)} bytes")
    if int.from_bytes(raw[:4], "little") != SPIRV_MAGIC:
        raise InvalidArgument(BACKEND, op, detail="not SPIR-V: it does not start with the magic number 0x07230203 "
                              "(little-endian)")
    return raw


class Stream:
    """One command queue and its submissions: each a command list run with a fence of its own."""

    def __init__(self, lib: ctypes.CDLL, ctx: int, dev: int, queue: int, ordinal: int):
        self.lib, self.ctx, self.dev, self.queue, self.ordinal = lib, ctx, dev, queue, ordinal
        self.submitted = self.completed = 0
        #: serial -> (fence, the command list to recycle or None for a batch's own, what must outlive the work)
        self.pending: dict[int, tuple[int, int | None, Any]] = {}
        self.lists: list[int] = []
        self.fences: list[int] = []

    def _list(self) -> int:
        if self.lists:
            return self.lists.pop()
        lst = _c.c_void_p()
        check(self.lib.zeCommandListCreate(self.ctx, self.dev, _c.byref(api.CommandListDesc(
            commandQueueGroupOrdinal=self.ordinal)), _c.byref(lst)), "zeCommandListCreate")
        return int(lst.value or 0)

    def _fence(self) -> int:
        if self.fences:
            return self.fences.pop()
        fence = _c.c_void_p()
        check(self.lib.zeFenceCreate(self.queue, _c.byref(api.FenceDesc()), _c.byref(fence)), "zeFenceCreate")
        return int(fence.value or 0)

    def run(self, record: Any, keep: Any = None) -> int:
        """Record a command list with `record(list)`, close it and execute it; the new serial."""
        lst = self._list()
        try:
            record(lst)
            check(self.lib.zeCommandListClose(lst), "zeCommandListClose")
            return self.execute(lst, True, keep)
        except BaseException:
            self.lib.zeCommandListReset(lst)
            self.lists.append(lst)
            raise

    def execute(self, lst: int, recycle: bool, keep: Any = None) -> int:
        """Execute a closed command list with a new fence (zeCommandQueueExecuteCommandLists); the new serial."""
        fence = self._fence()
        code = self.lib.zeCommandQueueExecuteCommandLists(self.queue, 1, _c.byref(_c.c_void_p(lst)), fence)
        if code:
            self.fences.append(fence)
            check(code, "zeCommandQueueExecuteCommandLists")
        self.submitted += 1
        self.pending[self.submitted] = (fence, lst if recycle else None, keep)
        return self.submitted

    def wait(self, serial: int, seconds: float | None) -> bool:
        timeout = api.WAIT_FOREVER if seconds is None else int(seconds * 1e9)
        for s in sorted(k for k in self.pending if k <= serial):
            fence, lst, _ = self.pending[s]
            code = self.lib.zeFenceHostSynchronize(fence, timeout)
            if code == api.NOT_READY:
                return False
            check(code, "zeFenceHostSynchronize")
            del self.pending[s]
            self.lib.zeFenceReset(fence)
            self.fences.append(fence)
            if lst is not None:
                self.lib.zeCommandListReset(lst)
                self.lists.append(lst)
            self.completed = max(self.completed, s)
        self.completed = max(self.completed, min(serial, self.submitted))
        return True

    def drain(self) -> None:
        if self.pending:
            self.wait(max(self.pending), None)

    def destroy(self) -> None:
        """Destroy its fences, lists and queue (after `drain`)."""
        for fence, lst, _ in self.pending.values():
            self.fences.append(fence)
            if lst is not None:
                self.lists.append(lst)
        self.pending.clear()
        for fence in self.fences:
            self.lib.zeFenceDestroy(fence)
        for lst in self.lists:
            self.lib.zeCommandListDestroy(lst)
        self.fences.clear()
        self.lists.clear()
        self.lib.zeCommandQueueDestroy(self.queue)


class Events:
    """Events from pools of a context, made as needed (host-visible; with kernel timestamps where asked)."""

    def __init__(self, device: LevelZeroDevice, timestamps: bool, per_pool: int = 32):
        self.device, self.timestamps, self.per_pool = device, timestamps, per_pool
        self.pools: list[int] = []
        self.events: list[int] = []
        self.left = 0

    def take(self) -> int:
        lib = self.device._lib
        if not self.left:
            flags = api.EVENT_POOL_HOST_VISIBLE | (api.EVENT_POOL_KERNEL_TIMESTAMP if self.timestamps else 0)
            pool = _c.c_void_p()
            check(lib.zeEventPoolCreate(self.device._zctx, _c.byref(api.EventPoolDesc(flags=flags,
                                                                                       count=self.per_pool)),
                                        1, _c.byref(_c.c_void_p(self.device._dev)), _c.byref(pool)),
                  "zeEventPoolCreate")
            self.pools.append(int(pool.value or 0))
            self.left = self.per_pool
        event = _c.c_void_p()
        desc = api.EventDesc(index=self.per_pool - self.left, signal=api.EVENT_SCOPE_HOST, wait=api.EVENT_SCOPE_HOST)
        check(lib.zeEventCreate(self.pools[-1], _c.byref(desc), _c.byref(event)), "zeEventCreate")
        self.left -= 1
        self.events.append(int(event.value or 0))
        return self.events[-1]

    def destroy(self) -> None:
        lib = self.device._lib
        for event in self.events:
            lib.zeEventDestroy(event)
        for pool in self.pools:
            lib.zeEventPoolDestroy(pool)
        self.events.clear()
        self.pools.clear()


class ZeFence:
    """A timeline fence over Level Zero events: each signalled value is an event a queue signals.  A reached
    value's event is retired, and reused (zeEventHostReset) once every queue has finished the work submitted
    before it was retired, so no queue can still be waiting on it; a long-lived fence keeps a few events."""

    def __init__(self, device: LevelZeroDevice, value: int):
        self.device = device
        self.reached = value
        self.points: list[tuple[int, int]] = []
        self.retired: list[tuple[int, list[tuple[Stream, int]]]] = []
        self.events = Events(device, False)

    def poll(self, lib: ctypes.CDLL) -> int:
        while self.points and lib.zeEventQueryStatus(self.points[0][1]) == 0:
            value, event = self.points.pop(0)
            self.reached = max(self.reached, value)
            self.retired.append((event, [(s, s.submitted) for s in self.device._all_streams()]))
        return self.reached

    def take(self, lib: ctypes.CDLL) -> int:
        """An unsignalled event: a retired one no queue can still wait on, else a new one."""
        if self.retired:
            for stream in self.device._all_streams():
                stream.wait(stream.submitted, 0)  # a poll: retire the submissions that have finished
        for i, (event, marks) in enumerate(self.retired):
            if all(stream.completed >= serial for stream, serial in marks):
                del self.retired[i]
                check(lib.zeEventHostReset(event), "zeEventHostReset")
                return event
        return self.events.take()

    def event_for(self, value: int) -> int | None:
        return next((event for point, event in self.points if point >= value), None)


class Recording:
    """A batch recorded into one command list (closed once, executed at every submit)."""

    def __init__(self, lst: int, timestamps: Events | None):
        self.lst = lst
        self.timestamps = timestamps
        self.stamps: list[int] = []
        self.reads: list[tuple[Any, np.ndarray]] = []
        self.keep: list[Any] = []


class LevelZeroDevice(ComputeDeviceBase):
    """One Level Zero device: a context, a compute queue (group ordinal 0), USM device memory."""

    backend = BACKEND
    language = "SPIR-V (OpenCL kernels)"
    buffer_type = LevelZeroBuffer
    pipeline_type = LevelZeroPipeline
    submission_type = LevelZeroSubmission
    buffer_limit_name = "maxMemAllocSize"
    group_limit_name = "maxGroupCount"

    def __init__(self, lib: ctypes.CDLL, driver: int, device: int, descriptor: DeviceDescriptor, *,
                 max_alloc: int, group_limits: tuple[int, int, int], compute_ordinal: int, queue_count: int = 1,
                 timestamps: bool = False, timer_ns: float = 1.0):
        self._lib, self._driver, self._dev = lib, driver, device
        self._ordinal = compute_ordinal
        self._zctx: Any = None
        self._zq: Any = None
        self._streams: list[Stream] = []
        ctx = _c.c_void_p()
        check(lib.zeContextCreate(driver, _c.byref(api.ContextDesc()), _c.byref(ctx)), "zeContextCreate")
        self._zctx = ctx.value
        queue = _c.c_void_p()
        desc = api.CommandQueueDesc(ordinal=compute_ordinal, index=0, mode=api.QUEUE_MODE_ASYNCHRONOUS)
        try:
            check(lib.zeCommandQueueCreate(self._zctx, device, _c.byref(desc), _c.byref(queue)), "zeCommandQueueCreate")
        except BaseException:
            lib.zeContextDestroy(self._zctx)
            raise
        self._zq = queue.value
        self._stream = Stream(lib, self._zctx, device, self._zq, compute_ordinal)
        self._queue_count = max(1, queue_count)
        self._timer_ns = timer_ns
        features = {"queues", "fences", "batches"} | ({"timestamps"} if timestamps else set())
        self._open(descriptor, max_buffer_bytes=max_alloc, group_limits=group_limits, features=features)

    # -- submissions: one command list and one fence each ------------------------------------------------

    def _execute(self, record: Any, op: str, keep: Any = None) -> int:
        """Record a command list with `record(list)`, close it and run it on the default queue; the new serial."""
        serial = self._stream.run(record, keep)
        self._submitted = serial
        return serial

    def _wait(self, serial: int, seconds: float | None) -> bool:
        done = self._stream.wait(serial, seconds)
        self._completed = max(self._completed, self._stream.completed)
        return done

    def _drain(self) -> None:
        for stream in [self._stream, *self._streams]:
            stream.drain()
        self._completed = max(self._completed, self._stream.completed)

    # -- memory -------------------------------------------------------------------------------------------

    def _create_buffer(self, nbytes: int, dtype: DType, data: np.ndarray | None) -> Memory:
        out = _c.c_void_p()
        check(self._lib.zeMemAllocDevice(self._zctx, _c.byref(api.DeviceMemAllocDesc()), nbytes, 64, self._dev,
                                         _c.byref(out)), "zeMemAllocDevice")
        mem = Memory(int(out.value or 0), nbytes)
        if data is not None:
            try:
                self._write(mem, data)
            except BaseException:
                self._lib.zeMemFree(self._zctx, mem.ptr)
                raise
        return mem

    def _free_buffer(self, handle: Memory) -> None:
        self._drain()  # work in flight may still use it
        check(self._lib.zeMemFree(self._zctx, handle.ptr), "zeMemFree")

    def _copy(self, dst: int, src: int, nbytes: int, keep: Any) -> None:
        lib = self._lib
        serial = self._execute(lambda lst: check(lib.zeCommandListAppendMemoryCopy(lst, dst, src, nbytes, None, 0,
                                                                                   None),
                                                 "zeCommandListAppendMemoryCopy"), "copy", keep)
        self._wait(serial, None)

    def _write(self, handle: Memory, data: np.ndarray) -> None:
        self._copy(handle.ptr, data.ctypes.data, data.nbytes, data)

    def _read(self, handle: Memory, out: np.ndarray) -> None:
        self._copy(out.ctypes.data, handle.ptr, out.nbytes, out)

    # -- modules, kernels, launches ------------------------------------------------------------------------

    def _prepare(self, code: Any, entry: str) -> tuple[bytes, Hashable]:
        raw = spirv_bytes(code)
        return raw, raw

    def _build(self, code: bytes, entry: str, buffers: int, params: int,
               workgroup_size: tuple[int, int, int]) -> KernelProgram:
        lib = self._lib
        source = _c.create_string_buffer(code, len(code))
        desc = api.ModuleDesc(format=api.MODULE_FORMAT_IL_SPIRV, inputSize=len(code),
                              pInputModule=_c.cast(source, _c.c_void_p), pBuildFlags=b"")
        module, log = _c.c_void_p(), _c.c_void_p()
        result = lib.zeModuleCreate(self._zctx, self._dev, _c.byref(desc), _c.byref(module), _c.byref(log))
        text = self._log_text(log.value)
        if result:
            from .results import result_name
            raise CompileError(BACKEND, "zeModuleCreate", text or f"zeModuleCreate returned {result_name(result)}",
                               result, result_name(result))
        kernel = _c.c_void_p()
        try:
            check(lib.zeKernelCreate(module, _c.byref(api.KernelDesc(pKernelName=entry.encode())), _c.byref(kernel)),
                  f"zeKernelCreate({entry!r})")
            props = api.KernelProperties()
            check(lib.zeKernelGetProperties(kernel, _c.byref(props)), "zeKernelGetProperties")
            if props.numKernelArgs != buffers + params:
                raise InvalidArgument(BACKEND, "pipeline", detail=f"kernel {entry!r} takes {props.numKernelArgs} "
                                      f"arguments, not {buffers} buffers + {params} params")
            check(lib.zeKernelSetGroupSize(kernel, *workgroup_size), "zeKernelSetGroupSize")
        except BaseException:
            if kernel.value:
                lib.zeKernelDestroy(kernel)
            lib.zeModuleDestroy(module)
            raise
        return KernelProgram(self, int(module.value or 0), int(kernel.value or 0), buffers, params)

    def _log_text(self, log: int | None) -> str:
        if not log:
            return ""
        lib = self._lib
        try:
            size = _c.c_size_t(0)
            if lib.zeModuleBuildLogGetString(log, _c.byref(size), None) or not size.value:
                return ""
            text = _c.create_string_buffer(size.value)
            if lib.zeModuleBuildLogGetString(log, _c.byref(size), text):
                return ""
            return text.value.decode(errors="replace")
        finally:
            lib.zeModuleBuildLogDestroy(log)

    def _destroy_kernel(self, program: KernelProgram) -> None:
        if self._zq is None:
            return
        self._drain()
        self._lib.zeKernelDestroy(program.kernel)
        self._lib.zeModuleDestroy(program.module)

    def _set_args(self, program: KernelProgram, handles: list[Memory], params: bytes) -> None:
        lib, kernel = self._lib, program.kernel
        for i, mem in enumerate(handles):
            check(lib.zeKernelSetArgumentValue(kernel, i, 8, _c.byref(_c.c_void_p(mem.ptr))),
                  f"zeKernelSetArgumentValue(argument {i})")
        words = _c.create_string_buffer(params, max(len(params), 1))
        for j in range(len(params) // 4):
            check(lib.zeKernelSetArgumentValue(kernel, len(handles) + j, 4, _c.byref(words, 4 * j)),
                  f"zeKernelSetArgumentValue(argument {len(handles) + j})")

    def _launch(self, program: KernelProgram, handles: list[Memory], dims: tuple[int, int, int],
                params: bytes) -> int:
        self._set_args(program, handles, params)
        groups = api.GroupCount(*dims)
        lib = self._lib
        return self._execute(lambda lst: check(lib.zeCommandListAppendLaunchKernel(lst, program.kernel,
                                                                                   _c.byref(groups), None, 0, None),
                                               "zeCommandListAppendLaunchKernel"), "dispatch")

    # -- the execution model: queues, fences (events), batches (command lists), timestamps -------------------

    def _unsupported_reason(self, feature: str) -> str:
        why = {
            "timestamps": "this device reports no kernel timestamp bits (kernelTimestampValidBits is 0)",
            "typed_params": "Level Zero kernels take their arguments one by one (zeKernelSetArgumentValue); there "
                            "is no params block to reflect",
            "constants": "specialization constants of Level Zero modules are not wired in ironaccel",
            "map": "buffers are device USM; host and shared allocations are not offered yet",
            "dlpack": "buffers are device USM without a DLPack export yet",
        }
        return why.get(feature, f"the Level Zero backend does not provide {feature!r} (needs the driver's external "
                       "memory / IPC extensions, not wired)")

    def _queue_limit(self) -> int:
        return self._queue_count

    def _create_queue(self, priority: int) -> tuple[Stream, int]:
        used = max(-1, min(priority, 1))
        ze_priority = {0: api.QUEUE_PRIORITY_NORMAL, -1: api.QUEUE_PRIORITY_LOW, 1: api.QUEUE_PRIORITY_HIGH}[used]
        index = (len(self._streams) + 1) % self._queue_count
        queue = _c.c_void_p()
        desc = api.CommandQueueDesc(ordinal=self._ordinal, index=index, mode=api.QUEUE_MODE_ASYNCHRONOUS,
                                    priority=ze_priority)
        check(self._lib.zeCommandQueueCreate(self._zctx, self._dev, _c.byref(desc), _c.byref(queue)),
              "zeCommandQueueCreate")
        stream = Stream(self._lib, self._zctx, self._dev, int(queue.value or 0), self._ordinal)
        self._streams.append(stream)
        return stream, used

    def _destroy_queue(self, vq: Stream) -> None:
        vq.drain()
        vq.destroy()
        self._streams.remove(vq)

    def _on(self, vq: Stream | None) -> Stream:
        return self._stream if vq is None else vq

    def _ran(self, vq: Stream | None, serial: int) -> int:
        if vq is None:
            self._submitted = serial
        return serial

    def _launch_on(self, vq: Any, program: Any, handles: list[Any], dims: tuple[int, int, int], params: Any) -> int:
        if vq is None:
            return self._launch(program, handles, dims, params)
        self._set_args(program, handles, params)
        groups = api.GroupCount(*dims)
        lib = self._lib
        return int(vq.run(lambda lst: check(lib.zeCommandListAppendLaunchKernel(lst, program.kernel, _c.byref(groups),
                                                                                None, 0, None),
                                            "zeCommandListAppendLaunchKernel")))

    def _wait_on(self, vq: Any, serial: int, seconds: float | None) -> bool:
        if vq is None:
            return self._wait(serial, seconds)
        return bool(vq.wait(serial, seconds))

    def _last_serial(self, vq: Any) -> int:
        return self._submitted if vq is None else int(vq.submitted)

    def _create_fence(self, value: int, exportable: bool) -> ZeFence:
        return ZeFence(self, value)

    def _destroy_fence(self, vf: ZeFence) -> None:
        self._drain()  # a queue may still wait on or signal its events
        vf.events.destroy()

    def _fence_value(self, vf: ZeFence) -> int:
        return vf.poll(self._lib)

    def _fence_wait(self, vf: ZeFence, value: int, seconds: float | None) -> bool:
        if vf.poll(self._lib) >= value:
            return True
        event = vf.event_for(value)
        if event is None:
            return False
        code = self._lib.zeEventHostSynchronize(event, api.WAIT_FOREVER if seconds is None else int(seconds * 1e9))
        if code == api.NOT_READY:
            return False
        check(code, "zeEventHostSynchronize")
        return vf.poll(self._lib) >= value

    def _all_streams(self) -> list[Stream]:
        return [self._stream, *self._streams]

    def _signal(self, vq: Any, vf: ZeFence, value: int) -> None:
        vf.poll(self._lib)
        event = vf.take(self._lib)
        lib = self._lib
        self._ran(vq, self._on(vq).run(lambda lst: check(lib.zeCommandListAppendSignalEvent(lst, event),
                                                         "zeCommandListAppendSignalEvent")))
        vf.points.append((value, event))

    def _wait_fence(self, vq: Any, vf: ZeFence, value: int) -> None:
        if vf.poll(self._lib) >= value:
            return
        event = vf.event_for(value)
        if event is None:
            raise InvalidArgument(BACKEND, "wait", detail=f"nothing signals value {value} of this fence")
        lib = self._lib
        self._ran(vq, self._on(vq).run(lambda lst: check(lib.zeCommandListAppendWaitOnEvents(
            lst, 1, _c.byref(_c.c_void_p(event))), "zeCommandListAppendWaitOnEvents")))

    def _record(self, commands: Any, timestamps: bool) -> Recording:
        lib = self._lib
        lst = _c.c_void_p()
        check(lib.zeCommandListCreate(self._zctx, self._dev, _c.byref(api.CommandListDesc(
            commandQueueGroupOrdinal=self._ordinal)), _c.byref(lst)), "zeCommandListCreate")
        rec = Recording(int(lst.value or 0), Events(self, True) if timestamps else None)
        try:
            if rec.timestamps is not None:
                rec.stamps = [rec.timestamps.take() for _ in commands]
                for event in rec.stamps:  # each submit times afresh
                    check(lib.zeCommandListAppendEventReset(rec.lst, event), "zeCommandListAppendEventReset")
                check(lib.zeCommandListAppendBarrier(rec.lst, None, 0, None), "zeCommandListAppendBarrier")
            for i, command in enumerate(commands):
                self._append(rec, command, rec.stamps[i] if rec.stamps else None)
                # commands of one list may overlap: a barrier keeps the batch's order
                check(lib.zeCommandListAppendBarrier(rec.lst, None, 0, None), "zeCommandListAppendBarrier")
            check(lib.zeCommandListClose(rec.lst), "zeCommandListClose")
        except BaseException:
            self._free_recording(rec)
            raise
        return rec

    def _append(self, rec: Recording, command: Any, event: int | None) -> None:
        lib, lst, kind = self._lib, rec.lst, command.kind
        if kind == "dispatch":
            self._set_args(command.program, command.handles, command.params)
            groups = api.GroupCount(*command.dims)
            check(lib.zeCommandListAppendLaunchKernel(lst, command.program.kernel, _c.byref(groups), event, 0, None),
                  "zeCommandListAppendLaunchKernel")
        elif kind == "copy":
            check(lib.zeCommandListAppendMemoryCopy(lst, command.dst.ptr + command.dst_offset,
                                                    command.src.ptr + command.src_offset, command.nbytes, event, 0,
                                                    None), "zeCommandListAppendMemoryCopy")
        elif kind == "fill":
            word = np.array([command.word], np.uint32)
            rec.keep.append(word)
            check(lib.zeCommandListAppendMemoryFill(lst, command.dst.ptr + command.offset, word.ctypes.data, 4,
                                                    command.nbytes, event, 0, None), "zeCommandListAppendMemoryFill")
        elif kind == "write":
            data = command.data
            rec.keep.append(data)
            check(lib.zeCommandListAppendMemoryCopy(lst, command.dst.ptr + command.offset, data.ctypes.data,
                                                    data.nbytes, event, 0, None), "zeCommandListAppendMemoryCopy")
        else:  # read: into staging of the recording, handed to `out` when the submission finished
            staging = np.empty(command.out.nbytes, np.uint8)
            rec.reads.append((command, staging))
            check(lib.zeCommandListAppendMemoryCopy(lst, staging.ctypes.data, command.src.ptr + command.offset,
                                                    staging.nbytes, event, 0, None), "zeCommandListAppendMemoryCopy")

    def _submit(self, vq: Any, rec: Recording, waits: list[tuple[Any, int]], signals: list[tuple[Any, int]]) -> int:
        for vf, value in waits:
            self._wait_fence(vq, vf, value)
        serial = self._ran(vq, self._on(vq).execute(rec.lst, False, rec))
        for vf, value in signals:
            self._signal(vq, vf, value)
        return serial

    def _finish(self, rec: Recording, serial: int) -> None:
        for command, staging in rec.reads:
            command.out[:] = staging

    def _timings(self, rec: Recording, serial: int) -> list[tuple[float, float]]:
        spans = []
        for event in rec.stamps:
            result = api.KernelTimestampResult()
            check(self._lib.zeEventQueryKernelTimestamp(event, _c.byref(result)), "zeEventQueryKernelTimestamp")
            spans.append((result.global_.kernelStart * self._timer_ns, result.global_.kernelEnd * self._timer_ns))
        return spans

    def _free_recording(self, rec: Recording) -> None:
        if self._zq is None:
            return
        self._drain()
        self._lib.zeCommandListDestroy(rec.lst)
        if rec.timestamps is not None:
            rec.timestamps.destroy()

    def _shutdown(self) -> None:
        lib = self._lib
        if self._zq is None:
            return
        try:
            self._drain()
        finally:
            for stream in [*self._streams, self._stream]:
                stream.destroy()
            self._streams.clear()
            lib.zeContextDestroy(self._zctx)
            self._zq = self._zctx = None
