"""WebGPUDevice: ironaccel's ComputeDevice on a wgpu-py device -- the vendor calls under the compute kit.

One wgpu device and its queue.  Every call goes through that one in-order
queue, so a download is ordered after the dispatches before it and a dispatch
after the uploads before it.  Params go to a per-program uniform buffer with
`queue.write_buffer`, which is itself a queue operation, so back-to-back
dispatches with different params each see their own values.  The checks,
handles, cache and waiting are `ironaccel.compute.ComputeDeviceBase`'s.

The execution model (contract 1.2) on WebGPU:

* one queue: WebGPU gives a device exactly one (`create_queue` is Unsupported);
* fences are the compute kit's `EmulatedFence`: WebGPU has no timeline
  semaphore, so a fence value is tied to the serial of the queue's last
  submission and is reached when that submission is seen finished.  Signalling
  costs nothing on the device; a host wait costs what any WebGPU wait does (a
  one-word clear and a buffer map, see `submission`), and a device-side wait is
  free because the one queue runs in order;
* batches: see `batch` (re-encoded per submit: WebGPU command buffers are single-use);
* timestamps: `timestamp-query` per dispatch via `timestampWrites`, where the adapter has it;
* typed params: the WGSL `var<uniform>` block (`wgsl_params`, layout "wgsl-uniform");
* constants: WGSL `override` declarations (`wgsl_overrides`), passed as pipeline constants;
* memory kinds "upload" (MAP_WRITE | COPY_SRC) and "readback" (MAP_READ | COPY_DST): WebGPU forbids a
  mappable storage buffer, so "host" memory does not exist and `map()` is by copy; hence no DLPack export
  and no zero-copy `np.asarray` (both raise a typed error naming `download`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.compute import ComputeDeviceBase
from ironaccel.compute.execution import Command
from ironaccel.compute.handles import SpareBuffers
from ironaccel.types import DeviceDescriptor, DType

from .adapters import WANTED_FEATURES, WANTED_LIMITS
from .batch import Recording
from .errors import translate
from .memory import Staging, Storage, WebGPUBuffer, map_for_read, padded
from .pipeline import WebGPUPipeline, WebGPUProgram
from .submission import Completion, WebGPUSubmission

BACKEND = "webgpu"
#: Bytes of uploads and writes wgpu-native may hold in staging before ironaccel flushes them with an empty
#: submission (it keeps them until the next queue submission otherwise).
FLUSH_PENDING_BYTES = 64 << 20
#: The execution features every WebGPU device has; "timestamps" is added where the device has 'timestamp-query'.
FEATURES = frozenset({"fences", "batches", "typed_params", "constants", "map"})
#: Why a feature of the execution model is missing on WebGPU.
_WHY_NOT = {
    "queues": "WebGPU gives a device exactly one queue (GPUDevice.queue); it has no call to make another",
    "timestamps": "this adapter lacks the 'timestamp-query' feature",
    "dlpack": "WebGPU cannot keep a buffer mapped while the GPU may use it (a mappable buffer cannot be a "
              "storage buffer), so there is no host memory to hand to DLPack without a copy; device.download() "
              "copies",
    "export_memory": "WebGPU (and wgpu-py) has no external memory: no call exports a buffer's memory as an fd",
    "import_memory": "WebGPU (and wgpu-py) has no external memory: no call imports an fd as a buffer",
    "export_fence": "WebGPU has no fences or semaphores to export (ironaccel's fences on it are emulated)",
    "import_fence": "WebGPU has no fences or semaphores to import an fd into",
    "fences on several queues": "WebGPU has one queue",
}


def timestamp_period(gpu_queue: Any) -> float:
    """wgpuQueueGetTimestampPeriod: ns per tick of resolved timestamps (wgpu-py 0.32 has no method for it)."""
    try:
        from wgpu.backends.wgpu_native._ffi import lib

        period = float(lib.wgpuQueueGetTimestampPeriod(gpu_queue._internal))
    except (ImportError, AttributeError, TypeError):
        return 1.0
    return period if period > 0 else 1.0


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
    supported_memory = ("device", "upload", "readback")
    bindable_memory = ("device",)
    execution_features = FEATURES | {"timestamps"}

    def __init__(self, wgpu: Any, adapter: Any, descriptor: DeviceDescriptor):
        self.wgpu = wgpu
        # Measured: requesting these features and limits leaves a dispatch's cost as it is (direct wgpu-py
        # bursts with each feature alone, all, none: the same best time a dispatch).
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
        #: The alignment of a bind group's uniform offset (a batch's params sit at multiples of it).
        self.uniform_align = max(16, int(device_limits.get("min-uniform-buffer-offset-alignment", 256)))
        have = FEATURES | ({"timestamps"} if "timestamp-query" in self.gpu.features else set())
        #: Nanoseconds per timestamp tick (wgpu-native's queue reports it; 1.0 where this wgpu-py cannot ask).
        self.timestamp_period = timestamp_period(self.gpu_queue)
        self._open(descriptor, max_buffer_bytes=int(device_limits["max-buffer-size"]) & ~3,
                   group_limits=(self.max_groups,) * 3,
                   max_buffers=int(device_limits["max-storage-buffers-per-shader-stage"]),
                   max_params=int(device_limits["max-uniform-buffer-binding-size"]) // 4, features=have)

    def _unsupported_reason(self, feature: str) -> str:
        return _WHY_NOT.get(feature, super()._unsupported_reason(feature))

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
        return storage.kind == "device" and self._spare.keep(storage, storage.nbytes)

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
        word = None
        if nbytes > whole:  # WebGPU writes whole words: keep the bytes of the last word that are not written
            word = np.zeros(4, np.uint8)
            if nbytes < storage.nbytes:
                self._copy_out(storage, whole, word)
            word[: nbytes - whole] = data[whole:]
        if storage.kind == "upload":  # MAP_WRITE memory has no COPY_DST: written through its mapping
            self._write_mapped(storage, data[:whole] if word is None else np.concatenate([data[:whole], word]))
            return
        try:
            self._staged(nbytes)
            if whole:
                self.gpu_queue.write_buffer(storage.gpu, 0, data[:whole])
            if word is not None:
                self.gpu_queue.write_buffer(storage.gpu, whole, word)
        except Exception as exc:
            raise translate(exc, "wgpuQueueWriteBuffer") from None

    def _write_mapped(self, storage: Storage, words: np.ndarray) -> None:
        """Write whole words at the start of an "upload" buffer through a mapping (once the GPU is done with it)."""
        try:
            storage.gpu.map_async(self.wgpu.MapMode.WRITE, 0, words.size).sync_wait()
        except Exception as exc:
            raise translate(exc, "wgpuBufferMapAsync") from None
        try:
            storage.gpu.write_mapped(words, 0)
        finally:
            storage.gpu.unmap()

    def _read(self, storage: Storage, out: np.ndarray) -> None:
        self._copy_out(storage, 0, out)

    def _copy_out(self, storage: Storage, offset: int, out: np.ndarray) -> None:
        """Copy bytes `offset..offset+out.size` of the buffer into `out`, after all earlier work."""
        nbytes = out.size
        copy_bytes = padded(nbytes)
        if storage.kind == "readback":  # MAP_READ memory has no COPY_SRC: read through its mapping
            end = padded(offset + nbytes)
            try:
                storage.gpu.map_async(self.wgpu.MapMode.READ, 0, end).sync_wait()
            except Exception as exc:
                raise translate(exc, "wgpuBufferMapAsync") from None
            try:
                view = storage.gpu.read_mapped(0, end, copy=False)
                np.copyto(out, np.frombuffer(view, np.uint8, nbytes, offset))
            finally:
                storage.gpu.unmap()
            return
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

    # -- memory kinds and mapping (map by copy: a WebGPU mapping cannot outlive a submission) ---------------

    def _create_memory(self, nbytes: int, dtype: DType, memory: str, exportable: bool) -> Storage:
        usage = self.wgpu.BufferUsage
        kind = usage.MAP_WRITE | usage.COPY_SRC if memory == "upload" else usage.MAP_READ | usage.COPY_DST
        try:
            return Storage(self.gpu.create_buffer(size=padded(nbytes), usage=kind), nbytes, memory)
        except Exception as exc:
            raise translate(exc, "wgpuDeviceCreateBuffer") from None

    def _memory_of(self, storage: Storage) -> tuple[bool, bool]:
        return storage.kind != "device", False

    def _map(self, storage: Storage, write: bool) -> np.ndarray:
        out = np.empty(storage.nbytes, np.uint8)
        self._read(storage, out)
        return out

    def _unmap(self, storage: Storage, array: np.ndarray | None, write: bool) -> None:
        if write and array is not None:
            self._write(storage, array.reshape(-1).view(np.uint8))

    # -- batches and timestamps ---------------------------------------------------------------------------

    def _record(self, commands: Sequence[Command], timestamps: bool) -> Recording:
        return Recording(self, commands, timestamps)

    def _update(self, rec: Recording, index: int, command: Command) -> bool:
        return rec.update(index, command)

    def _submit(self, vq: Any, rec: Recording, waits: list[tuple[Any, int]], signals: list[tuple[Any, int]]) -> int:
        try:
            rec.submit()
        except Exception as exc:
            raise translate(exc, "wgpuQueueSubmit") from None
        self._pending_bytes = 0
        self._submitted += 1
        return self._submitted

    def _finish(self, rec: Recording, serial: int) -> None:
        try:
            rec.finish(serial)
        except Exception as exc:
            raise translate(exc, "wgpuBufferMapAsync") from None

    def _timings(self, rec: Recording, serial: int) -> list[tuple[float, float]]:
        return rec.spans.pop(serial)

    def _free_recording(self, rec: Recording) -> None:
        rec.release()

    # -- pipelines and dispatch -------------------------------------------------------------------------

    def _build(self, code: str, entry: str, buffers: int, params: int,
               workgroup_size: tuple[int, int, int]) -> WebGPUProgram:
        return WebGPUProgram(self, code, entry, buffers, params)

    def _compile(self, code: str, entry: str, buffers: int, params: int | None, workgroup_size: tuple[int, int, int],
                 constants: dict[str | int, Any]) -> WebGPUProgram:
        return WebGPUProgram(self, code, entry, buffers, params, constants)

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
