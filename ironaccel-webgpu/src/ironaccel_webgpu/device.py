"""WebGPUDevice: ironaccel's ComputeDevice on a wgpu-py device.

One wgpu device and its queue.  Every call goes through that one in-order
queue, so a download is ordered after the dispatches before it and a dispatch
after the uploads before it.  Params go to a per-pipeline uniform buffer with
`queue.write_buffer`, which is itself a queue operation, so back-to-back
dispatches with different params each see their own values.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.compute import (
    check_out,
    element_type,
    evict_unused,
    host_array,
    numpy_dtype,
    pack_params,
    source_text,
    workgroups,
)
from ironaccel.errors import ClosedError, InvalidArgument
from ironaccel.types import DeviceDescriptor, DType

from .adapters import WANTED_FEATURES, WANTED_LIMITS
from .errors import translate
from .memory import Staging, WebGPUBuffer, map_for_read, padded
from .pipeline import Program, WebGPUPipeline
from .submission import Completion, Submission

BACKEND = "webgpu"
#: Compiled programs kept per device (only those no open Pipeline uses are dropped).
MAX_PROGRAMS = 128


class WebGPUDevice:
    """A ComputeDevice on one WebGPU adapter; code is WGSL."""

    def __init__(self, wgpu: Any, adapter: Any, descriptor: DeviceDescriptor):
        self.wgpu = wgpu
        self.descriptor = descriptor
        features = [f for f in WANTED_FEATURES if f in adapter.features]
        limits = {k: v for k, v in adapter.limits.items() if k in WANTED_LIMITS}
        try:
            self.gpu = adapter.request_device_sync(
                label=f"ironaccel {descriptor.name}", required_features=features, required_limits=limits)
        except Exception as exc:
            raise translate(exc, "wgpuAdapterRequestDevice") from None
        self.queue = self.gpu.queue
        device_limits = self.gpu.limits
        self.max_buffer_bytes = int(device_limits["max-buffer-size"])
        self.max_binding_bytes = int(device_limits["max-storage-buffer-binding-size"])
        self.max_groups = int(device_limits["max-compute-workgroups-per-dimension"])
        self._group_limits = (self.max_groups,) * 3
        self._usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self._staging = Staging(wgpu, self.gpu)
        self._completion = Completion(self)
        self._programs: OrderedDict[tuple[Any, ...], Program] = OrderedDict()
        self._lock = threading.RLock()
        self._closed = False

    # -- memory -----------------------------------------------------------------------------------------

    def _new_buffer(self, size: Any, dtype: DType, op: str, data: np.ndarray | None = None) -> WebGPUBuffer:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
            raise InvalidArgument(BACKEND, op, detail=f"size must be an int, got {size!r}")
        size = int(size)
        nbytes = size * dtype.itemsize
        if size <= 0 or padded(nbytes) > self.max_buffer_bytes:
            raise InvalidArgument(BACKEND, op, detail=f"size {size} x {dtype.itemsize} bytes is outside "
                                  f"1..{self.max_buffer_bytes} bytes (the device's max-buffer-size)")
        try:
            if data is None:
                handle = self.gpu.create_buffer(size=padded(nbytes), usage=self._usage)
            else:  # mapped at creation and filled: one call, and no staging copy where memory is host-visible
                handle = self.gpu.create_buffer_with_data(data=data, usage=self._usage)
        except Exception as exc:
            raise translate(exc, "wgpuDeviceCreateBuffer") from None
        return WebGPUBuffer(self, handle, dtype, size)

    def alloc(self, size: int, dtype: Any = "float32") -> WebGPUBuffer:
        """A new storage buffer of `size` elements (contents undefined)."""
        self._check_open("alloc")
        return self._new_buffer(size, element_type(BACKEND, dtype, "alloc"), "alloc")

    def upload(self, array: Any) -> WebGPUBuffer:
        """A new storage buffer holding a copy of a C-contiguous numpy array (flattened)."""
        self._check_open("upload")
        array = host_array(BACKEND, array, "upload")
        dtype = element_type(BACKEND, array.dtype, "upload")
        data = array
        if array.nbytes % 4:  # WebGPU sizes are multiples of 4 bytes
            data = np.zeros(padded(array.nbytes), np.uint8)
            data[: array.nbytes] = array.reshape(-1).view(np.uint8)
        with self._lock:
            return self._new_buffer(array.size, dtype, "upload", data)

    def write(self, buffer: WebGPUBuffer, array: Any) -> None:
        """Copy a C-contiguous array into the start of `buffer`, in queue order (wgpuQueueWriteBuffer)."""
        self._check_open("write")
        handle = self._own(buffer, "write")
        array = host_array(BACKEND, array, "write")
        if array.nbytes > buffer.nbytes:
            raise InvalidArgument(BACKEND, "write", detail=f"{array.nbytes} bytes into a buffer of {buffer.nbytes}")
        data = array.reshape(-1).view(np.uint8)
        if array.nbytes % 4:  # WebGPU writes whole 4-byte words
            if array.nbytes != buffer.nbytes:
                raise InvalidArgument(BACKEND, "write", detail=f"{array.nbytes} bytes: a partial write must be a "
                                      "multiple of 4 bytes in webgpu")
            data = np.zeros(padded(array.nbytes), np.uint8)
            data[: array.nbytes] = array.reshape(-1).view(np.uint8)
        if data.nbytes:
            with self._lock:
                self.queue.write_buffer(handle, 0, data)

    def download(self, buffer: WebGPUBuffer, out: Any = None) -> np.ndarray:
        """The buffer's contents as a new array, or copied into `out`; waits for earlier work."""
        self._check_open("download")
        handle = self._own(buffer, "download")
        if out is None:
            out = np.empty(buffer.size, numpy_dtype(buffer.dtype))
        else:
            check_out(BACKEND, out, buffer.nbytes)
        nbytes = out.nbytes
        if nbytes == 0:
            return out
        copy_bytes = padded(nbytes)
        with self._lock:
            staging, temporary = self._staging.get(copy_bytes)
            encoder = self.gpu.create_command_encoder()
            encoder.copy_buffer_to_buffer(handle, 0, staging, 0, copy_bytes)
            self.queue.submit([encoder.finish()])
            done_through = self._completion.submitted
            try:
                map_for_read(staging, self.wgpu, copy_bytes).sync_wait()
            except Exception as exc:
                raise translate(exc, "wgpuBufferMapAsync") from None
            try:
                view = staging.read_mapped(0, copy_bytes, copy=False)
                np.copyto(out.reshape(-1).view(np.uint8), np.frombuffer(view, np.uint8, nbytes))
            finally:
                staging.unmap()
                if temporary:
                    staging.destroy()
            # the copy ran after every earlier submission, so those have all finished
            if done_through > self._completion.completed:
                self._completion.completed = done_through
        return out

    # -- pipelines and dispatch -------------------------------------------------------------------------

    def pipeline(
        self,
        code: str | bytes | Sequence[int],
        entry: str = "main",
        *,
        buffers: int,
        params: int = 0,
        workgroup_size: tuple[int, int, int] = (64, 1, 1),
    ) -> WebGPUPipeline:
        """Compile WGSL `code` (cached per device) into a pipeline with `buffers` storage bindings."""
        self._check_open("pipeline")
        code = source_text(BACKEND, code, "WGSL")
        for name, value, low in (("buffers", buffers, 0), ("params", params, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidArgument(BACKEND, "pipeline", detail=f"{name} must be an int >= {low}, got {value!r}")
        key = (code, entry, buffers, params)
        with self._lock:
            program = self._programs.get(key)
            if program is None or program.pipeline is None:
                program = Program(self, code, entry, buffers, params)
                self._programs[key] = program
                evict_unused(self._programs, MAX_PROGRAMS)
            else:
                self._programs.move_to_end(key)
            return WebGPUPipeline(self, program, entry, tuple(workgroup_size))  # type: ignore[arg-type]

    def dispatch(
        self,
        pipeline: WebGPUPipeline,
        buffers: Sequence[WebGPUBuffer],
        groups: int | tuple[int, ...],
        params: Sequence[Any] = (),
    ) -> Submission:
        """Run `pipeline` over `groups` workgroups; returns at once with a Submission."""
        if self._closed:
            raise ClosedError(BACKEND, "dispatch", "device")
        if not isinstance(pipeline, WebGPUPipeline):
            raise InvalidArgument(BACKEND, "dispatch", detail=f"not a webgpu pipeline: {pipeline!r}")
        program = pipeline.checked(self, "dispatch")
        gx, gy, gz = self._groups(groups)
        if len(buffers) != program.buffers:
            raise InvalidArgument(BACKEND, "dispatch",
                                  detail=f"the pipeline binds {program.buffers} buffers, got {len(buffers)}")
        buffers = list(buffers)
        for buf in buffers:
            self._own(buf, "dispatch")
        data = pack_params(BACKEND, params, program.params) if program.params or params else b""
        with self._lock:
            group = program.bind_group(self, buffers)
            if program.uniform is not None and data != program.last_params:
                self.queue.write_buffer(program.uniform, 0, data)
                program.last_params = data
            encoder = self.gpu.create_command_encoder()
            compute = encoder.begin_compute_pass()
            compute.set_pipeline(program.pipeline)
            compute.set_bind_group(0, group)
            compute.dispatch_workgroups(gx, gy, gz)
            compute.end()
            self.queue.submit([encoder.finish()])
            completion = self._completion
            completion.submitted += 1
            return Submission(completion, completion.submitted)

    def _groups(self, groups: Any) -> tuple[int, int, int]:
        """(x, y, z) workgroup counts, checked against the device's limits."""
        return workgroups(BACKEND, groups, self._group_limits, "dispatch", "max-compute-workgroups-per-dimension")

    def synchronize(self) -> None:
        """Wait for everything submitted so far."""
        self._check_open("synchronize")
        with self._lock:
            self._completion.reach(self._completion.submitted, None)

    # -- lifetime ---------------------------------------------------------------------------------------

    def _check_open(self, op: str) -> None:
        if self._closed:
            raise ClosedError(BACKEND, op, "device")

    def _own(self, buffer: Any, op: str) -> Any:
        if not isinstance(buffer, WebGPUBuffer) or buffer._device is not self:
            raise InvalidArgument(BACKEND, op, detail=f"the buffer belongs to another device: {buffer!r}")
        handle = buffer.handle
        if handle is None:
            raise ClosedError(BACKEND, op, "buffer")
        return handle

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Wait for outstanding work, destroy the device with every buffer and pipeline; twice is a no-op."""
        if self._closed:
            return
        with self._lock:
            try:
                self._completion.reach(self._completion.submitted, None)
            finally:
                self._closed = True  # buffers see it: destroying the device frees their memory
                for program in self._programs.values():
                    program.release()
                self._programs.clear()
                self._staging.release()
                self._completion.release()
                self.gpu.destroy()

    def __enter__(self) -> WebGPUDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<WebGPUDevice {self.descriptor.ordinal}: {self.descriptor.name}{' closed' if self._closed else ''}>"

