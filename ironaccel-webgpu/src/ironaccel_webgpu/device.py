"""WebGPUDevice: ironaccel's ComputeDevice on a wgpu-py device -- the vendor calls under the compute kit.

One wgpu device and its queue.  Every call goes through that one in-order
queue, so a download is ordered after the dispatches before it and a dispatch
after the uploads before it.  Params go to a per-program uniform buffer with
`queue.write_buffer`, which is itself a queue operation, so back-to-back
dispatches with different params each see their own values.  The checks,
handles, cache and waiting are `ironaccel.compute.ComputeDeviceBase`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ironaccel.compute import ComputeDeviceBase
from ironaccel.compute.handles import SpareBuffers
from ironaccel.types import DeviceDescriptor, DType

from .adapters import WANTED_FEATURES, WANTED_LIMITS
from .errors import translate
from .memory import Staging, Storage, WebGPUBuffer, map_for_read, padded
from .pipeline import WebGPUPipeline, WebGPUProgram
from .submission import Completion, WebGPUSubmission

BACKEND = "webgpu"
#: Bytes of uploads and writes wgpu-native may hold in staging before ironaccel flushes them with an empty
#: submission (it keeps them until the next queue submission otherwise).
FLUSH_PENDING_BYTES = 64 << 20


class WebGPUDevice(ComputeDeviceBase):
    """A ComputeDevice on one WebGPU adapter; code is WGSL."""

    backend = BACKEND
    language = "WGSL"
    buffer_type = WebGPUBuffer
    pipeline_type = WebGPUPipeline
    submission_type = WebGPUSubmission
    buffer_limit_name = "the device's max-buffer-size"
    group_limit_name = "max-compute-workgroups-per-dimension"
    binding_limit_name = "max-storage-buffers-per-shader-stage"
    params_limit_name = "max-uniform-buffer-binding-size / 4"

    def __init__(self, wgpu: Any, adapter: Any, descriptor: DeviceDescriptor):
        self.wgpu = wgpu
        # Measured: requesting these features and limits leaves a dispatch's cost as it is (H200, direct wgpu-py
        # bursts with each feature alone, all, none: 62.6-65.0 us a dispatch at best).
        features = [f for f in WANTED_FEATURES if f in adapter.features]
        limits = {k: v for k, v in adapter.limits.items() if k in WANTED_LIMITS}
        try:
            self.gpu = adapter.request_device_sync(
                label=f"ironaccel {descriptor.name}", required_features=features, required_limits=limits)
        except Exception as exc:
            raise translate(exc, "wgpuAdapterRequestDevice") from None
        self.gpu_queue = self.gpu.queue
        device_limits = self.gpu.limits
        self.max_binding_bytes = int(device_limits["max-storage-buffer-binding-size"])
        self.max_groups = int(device_limits["max-compute-workgroups-per-dimension"])
        self._usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        self._staging = Staging(wgpu, self.gpu)
        self._completion = Completion(self)
        self._poll = getattr(self.gpu, "_poll", lambda: None)  # wgpu-py's native backend polls the device
        self._pending_bytes = 0  # staged by uploads and writes since the last submission
        self._spare = SpareBuffers()  # closed small buffers: they keep their bind groups
        self._open(descriptor, max_buffer_bytes=int(device_limits["max-buffer-size"]) & ~3,
                   group_limits=(self.max_groups,) * 3,
                   max_buffers=int(device_limits["max-storage-buffers-per-shader-stage"]),
                   max_params=int(device_limits["max-uniform-buffer-binding-size"]) // 4)

    # -- memory -----------------------------------------------------------------------------------------

    def _create_buffer(self, nbytes: int, dtype: DType, data: np.ndarray | None) -> Storage:
        storage = self._spare.take(nbytes)
        if storage is not None:
            if data is not None:
                self._write(storage, data)  # a queue operation: after the work that used it before
            return storage
        try:
            if data is None:
                handle = self.gpu.create_buffer(size=padded(nbytes), usage=self._usage)
            else:  # mapped at creation and filled: one call, and no staging copy where memory is host-visible
                if nbytes % 4:  # WebGPU sizes are whole words
                    words = np.zeros(padded(nbytes), np.uint8)
                    words[:nbytes] = data
                    data = words
                handle = self.gpu.create_buffer_with_data(data=data, usage=self._usage)
                self._staged(nbytes)
        except Exception as exc:
            raise translate(exc, "wgpuDeviceCreateBuffer") from None
        return Storage(handle, nbytes)

    def _staged(self, nbytes: int) -> None:
        """wgpu-native copied `nbytes` through a staging buffer that it frees only after a submission."""
        self._pending_bytes += nbytes
        if self._pending_bytes > FLUSH_PENDING_BYTES:
            self._flush()

    def _flush(self) -> None:
        self.gpu_queue.submit([])
        self._pending_bytes = 0

    def _recycle(self, storage: Storage) -> bool:
        return self._spare.keep(storage, storage.nbytes)

    def _free_buffer(self, storage: Storage) -> None:
        for program, key in storage.bind_keys:
            program.bind_groups.pop(key, None)
        storage.bind_keys.clear()
        storage.gpu.destroy()
        # wgpu-native frees a destroyed buffer, and the staging copy of its upload, only when it next maintains
        # the device after a submission: flush what is staged, then poll, or the memory stays until the next one.
        if self._pending_bytes:
            self._flush()
        self._poll()

    def _write(self, storage: Storage, data: np.ndarray) -> None:
        nbytes = data.size
        whole = nbytes & ~3
        try:
            self._staged(nbytes)
            if whole:
                self.gpu_queue.write_buffer(storage.gpu, 0, data[:whole])
            if nbytes > whole:  # WebGPU writes whole words: keep the bytes of the last word that are not written
                word = np.zeros(4, np.uint8)
                if nbytes < storage.nbytes:
                    self._copy_out(storage, whole, word)
                word[: nbytes - whole] = data[whole:]
                self.gpu_queue.write_buffer(storage.gpu, whole, word)
        except Exception as exc:
            raise translate(exc, "wgpuQueueWriteBuffer") from None

    def _read(self, storage: Storage, out: np.ndarray) -> None:
        self._copy_out(storage, 0, out)

    def _copy_out(self, storage: Storage, offset: int, out: np.ndarray) -> None:
        """Copy bytes `offset..offset+out.size` of the buffer into `out`, after all earlier work."""
        nbytes = out.size
        copy_bytes = padded(nbytes)
        staging, temporary = self._staging.get(copy_bytes)
        try:
            encoder = self.gpu.create_command_encoder()
            encoder.copy_buffer_to_buffer(storage.gpu, offset, staging, 0, copy_bytes)
            self.gpu_queue.submit([encoder.finish()])
            self._pending_bytes = 0
        except Exception as exc:
            raise translate(exc, "wgpuQueueSubmit") from None
        done_through = self._submitted
        try:
            map_for_read(staging, self.wgpu, copy_bytes).sync_wait()
        except Exception as exc:
            raise translate(exc, "wgpuBufferMapAsync") from None
        try:
            view = staging.read_mapped(0, copy_bytes, copy=False)
            np.copyto(out, np.frombuffer(view, np.uint8, nbytes))
        finally:
            staging.unmap()
            if temporary:
                staging.destroy()
        # the copy ran after every earlier submission, so those have all finished
        if done_through > self._completed:
            self._completed = done_through

    # -- pipelines and dispatch -------------------------------------------------------------------------

    def _build(self, code: str, entry: str, buffers: int, params: int,
               workgroup_size: tuple[int, int, int]) -> WebGPUProgram:
        return WebGPUProgram(self, code, entry, buffers, params)

    def _launch(self, program: WebGPUProgram, handles: list[Storage], dims: tuple[int, int, int],
                params: bytes) -> int:
        group = program.last_group if handles is program.last_buffers else program.bind_group(self, handles)
        try:
            if program.uniform is not None and params != program.last_params:
                self.gpu_queue.write_buffer(program.uniform, 0, params)
                program.last_params = params
            encoder = self.gpu.create_command_encoder()
            compute = encoder.begin_compute_pass()
            compute.set_pipeline(program.pipeline)
            compute.set_bind_group(0, group)
            compute.dispatch_workgroups(*dims)
            compute.end()
            self.gpu_queue.submit([encoder.finish()])
            self._pending_bytes = 0
        except Exception as exc:
            raise translate(exc, "wgpuQueueSubmit") from None
        self._submitted += 1
        return self._submitted

    def _wait(self, serial: int, seconds: float | None) -> bool:
        return self._completion.wait(serial, seconds)

    def _shutdown(self) -> None:
        self._staging.release()
        self._completion.release()
        self._completed = self._submitted
        self._spare.clear()
        self.gpu.destroy()  # frees every buffer still open
