"""Command batches on WebGPU: what a recording holds, and how a submit replays it.

A WebGPU command buffer is single-use (`GPUCommandBuffer` is consumed by
`queue.submit`), so a batch cannot be recorded into one and submitted again as
on Vulkan.  The recording is instead everything that does not change between
submits, built once: each dispatch's bind group, one uniform buffer holding
every dispatch's params at its own aligned offset, one staging buffer holding
the batch's writes and fill patterns, one read-back buffer for its reads and
timestamps, and the timestamp query set.  A submit replays the commands into
one command encoder (consecutive dispatches share one compute pass) and makes
one `queue.submit`; changed params and writes go up first with
`queue.write_buffer`, which the queue orders before that submission.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ironaccel.compute.execution import Command

from .errors import translate
from .memory import map_for_read

if TYPE_CHECKING:
    from .device import WebGPUDevice

try:  # wgpu-native's own pass calls: a submit replays set_bind_group + dispatch without wgpu-py's wrappers
    from wgpu.backends.wgpu_native._ffi import ffi as _ffi
    from wgpu.backends.wgpu_native._ffi import lib as _lib

    _SET_GROUP: Any = _lib.wgpuComputePassEncoderSetBindGroup
    _DISPATCH: Any = _lib.wgpuComputePassEncoderDispatchWorkgroups
    _NULL: Any = _ffi.NULL
except (ImportError, AttributeError):  # another wgpu-py: its public calls
    _SET_GROUP = _DISPATCH = _NULL = None

#: resolveQuerySet writes at offsets that are multiples of this.
RESOLVE_ALIGN = 256


def _round(value: int, align: int) -> int:
    return -(-value // align) * align


class Recording:
    """The vendor objects of one recorded batch and the plan a submit replays (see the module docstring)."""

    def __init__(self, device: WebGPUDevice, commands: Sequence[Command], timestamps: bool):
        self.device = device
        self.commands = commands
        self.timestamps = timestamps
        self.uniform: Any = None
        self.staging: Any = None
        self.readback: Any = None
        self.resolve: Any = None
        self.queries: Any = None
        self.spans: dict[int, list[tuple[float, float]]] = {}
        #: One entry per command: for a dispatch [pipeline, bind group, dims, params offset, the bind group's
        #: wgpu-native handle or None]; for a copy
        #: (src, src offset, dst, dst offset, bytes); a fill (dst, offset, bytes, staging offset or -1 to clear);
        #: a write (staging offset, dst, offset, bytes); a read (src, offset, read-back offset, bytes).
        self.plan: list[Any] = []
        wgpu, gpu = device.wgpu, device.gpu
        usage = wgpu.BufferUsage
        align = device.uniform_align
        params_at, staged_at, read_at = 0, 0, 0
        for command in commands:
            if command.kind == "dispatch":
                size = command.program.uniform_size
                self.plan.append([command.program.pipeline, None, command.dims, params_at if size else -1, None])
                params_at += _round(size, align) if size else 0
            elif command.kind == "copy":
                self.plan.append((command.src.gpu, command.src_offset, command.dst.gpu, command.dst_offset,
                                  command.nbytes))
            elif command.kind == "fill":
                self.plan.append((command.dst.gpu, command.offset, command.nbytes, staged_at if command.word else -1))
                staged_at += command.nbytes if command.word else 0
            elif command.kind == "write":
                self.plan.append((staged_at, command.dst.gpu, command.offset, command.nbytes))
                staged_at += command.nbytes
            else:
                self.plan.append((command.src.gpu, command.offset, read_at, command.nbytes))
                read_at += command.nbytes
        self.params = np.zeros(params_at, np.uint8)
        self.staged = np.zeros(staged_at, np.uint8)
        self.stamps_at = _round(read_at, 8)
        readback_bytes = self.stamps_at + (16 * len(commands) if timestamps else 0)
        try:
            if params_at:
                self.uniform = gpu.create_buffer(size=params_at, usage=usage.UNIFORM | usage.COPY_DST)
            if staged_at:
                self.staging = gpu.create_buffer(size=staged_at, usage=usage.COPY_SRC | usage.COPY_DST)
            if readback_bytes:
                self.readback = gpu.create_buffer(size=readback_bytes, usage=usage.MAP_READ | usage.COPY_DST)
            if timestamps:
                self.queries = gpu.create_query_set(type="timestamp", count=2 * len(commands))
                self.resolve = gpu.create_buffer(size=_round(16 * len(commands), RESOLVE_ALIGN),
                                                 usage=usage.QUERY_RESOLVE | usage.COPY_SRC)
        except Exception as exc:
            self.release()
            raise translate(exc, "wgpuDeviceCreateBuffer") from None
        try:
            for index, command in enumerate(commands):
                self.update(index, command)
        except BaseException:  # a bind group refused: free what was made
            self.release()
            raise
        self.params_dirty = bool(params_at)
        self.staged_dirty = bool(staged_at)

    def update(self, index: int, command: Command) -> bool:
        """Take a re-bound command into the recording in place (False: record the batch again)."""
        step = self.plan[index]
        if command.kind == "dispatch":
            program = command.program
            if program.pipeline is not step[0]:
                return False
            offset = step[3]
            if offset >= 0:
                params = command.params
                self.params[offset: offset + len(params)] = np.frombuffer(params, np.uint8)
                self.params_dirty = True
            step[1] = program.make_bind_group(self.device, command.handles, self.uniform, max(offset, 0))
            step[2] = command.dims
            step[4] = getattr(step[1], "_internal", None) if _SET_GROUP is not None else None
            return True
        if command.kind == "write":
            at = step[0]
            self.staged[at: at + command.nbytes] = command.data  # type: ignore[assignment]
            self.staged_dirty = True
            return True
        if command.kind == "fill":
            at = step[3]
            if (at >= 0) != bool(command.word):
                return False
            if at >= 0:
                self.staged[at: at + command.nbytes].view(np.uint32)[:] = command.word
                self.staged_dirty = True
            return True
        if command.kind == "read":
            return True  # `out` is read from the command when the submission finishes
        return False  # a copy with other buffers: recorded again

    def submit(self) -> None:
        """Replay the plan into one command encoder and submit it (after uploading changed params and writes)."""
        device = self.device
        gpu_queue = device.gpu_queue
        if self.params_dirty:
            gpu_queue.write_buffer(self.uniform, 0, self.params)
            self.params_dirty = False
        if self.staged_dirty:
            gpu_queue.write_buffer(self.staging, 0, self.staged)
            self.staged_dirty = False
        encoder = device.gpu.create_command_encoder()
        timed = self.timestamps
        queries = self.queries
        compute = None
        current = None
        native: Any = None
        for index, command in enumerate(self.commands):
            step = self.plan[index]
            kind = command.kind
            if kind == "dispatch":
                if timed:
                    compute = encoder.begin_compute_pass(timestamp_writes={
                        "query_set": queries, "beginning_of_pass_write_index": 2 * index,
                        "end_of_pass_write_index": 2 * index + 1})
                elif compute is None:
                    compute = encoder.begin_compute_pass()
                    current = None
                if step[0] is not current:
                    compute.set_pipeline(step[0])
                    current = step[0]
                    native = getattr(compute, "_internal", None) if _SET_GROUP is not None else None
                if native is not None and step[4] is not None:
                    # wgpu-native's functions, not wgpu-py's methods: measured to pay (bench/experiments/
                    # native_pass_calls.py, figures in bench/BASELINE.md); wgpu-native still checks the pass at
                    # end() and finish(), which go through wgpu-py.
                    _SET_GROUP(native, 0, step[4], 0, _NULL)
                    x, y, z = step[2]
                    _DISPATCH(native, x, y, z)
                else:
                    compute.set_bind_group(0, step[1])
                    compute.dispatch_workgroups(*step[2])
                if timed:
                    compute.end()
                    compute = current = None
                continue
            if compute is not None:
                compute.end()
                compute = current = None
            if timed:  # a copy is timed between two empty passes: a pass is where WebGPU writes timestamps
                encoder.begin_compute_pass(timestamp_writes={
                    "query_set": queries, "beginning_of_pass_write_index": 2 * index}).end()
            if kind == "copy":
                encoder.copy_buffer_to_buffer(*step)
            elif kind == "fill":
                dst, offset, nbytes, at = step
                if at < 0:
                    encoder.clear_buffer(dst, offset, nbytes)
                else:
                    encoder.copy_buffer_to_buffer(self.staging, at, dst, offset, nbytes)
            elif kind == "write":
                at, dst, offset, nbytes = step
                encoder.copy_buffer_to_buffer(self.staging, at, dst, offset, nbytes)
            else:
                src, offset, at, nbytes = step
                encoder.copy_buffer_to_buffer(src, offset, self.readback, at, nbytes)
            if timed:
                encoder.begin_compute_pass(timestamp_writes={
                    "query_set": queries, "end_of_pass_write_index": 2 * index + 1}).end()
        if compute is not None:
            compute.end()
        if timed:
            count = 2 * len(self.commands)
            encoder.resolve_query_set(queries, 0, count, self.resolve, 0)
            encoder.copy_buffer_to_buffer(self.resolve, 0, self.readback, self.stamps_at, 8 * count)
        gpu_queue.submit([encoder.finish()])

    def finish(self, serial: int) -> None:
        """The submission `serial` finished: copy its reads into their `out` arrays and keep its timestamps."""
        if self.readback is None:
            return
        size = self.readback.size
        map_for_read(self.readback, self.device.wgpu, size).sync_wait()
        try:
            data = np.frombuffer(self.readback.read_mapped(0, size, copy=False), np.uint8)
            for index, command in enumerate(self.commands):
                if command.kind == "read" and command.out is not None:
                    at, nbytes = self.plan[index][2], self.plan[index][3]
                    command.out[:] = data[at: at + nbytes]
            if self.timestamps:
                # resolved timestamps are ticks (wgpu-native normalizes only when asked to): ns = ticks * period
                stamps = data[self.stamps_at: self.stamps_at + 16 * len(self.commands)].view(np.uint64)
                ns = self.device.timestamp_period
                self.spans[serial] = [(int(stamps[2 * i]) * ns, int(stamps[2 * i + 1]) * ns)
                                      for i in range(len(self.commands))]
        finally:
            self.readback.unmap()

    def release(self) -> None:
        for name in ("uniform", "staging", "readback", "resolve", "queries"):
            obj = getattr(self, name)
            if obj is not None:
                obj.destroy()
                setattr(self, name, None)
        self.plan = []
