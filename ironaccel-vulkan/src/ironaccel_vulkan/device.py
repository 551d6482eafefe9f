"""VulkanDevice: the ComputeDevice protocol on one Vulkan device -- the Vulkan calls under the compute kit.

    dev = ironaccel.open("vulkan", 0)
    x = dev.upload(np.arange(1024, dtype=np.float32))
    y = dev.alloc(1024, "float32")
    p = dev.pipeline(spirv_bytes, buffers=2, params=3)
    dev.dispatch(p, [x, y], 16, (np.float32(2), np.float32(1), np.uint32(1024))).wait()
    dev.download(y)

Ordering is that of one in-order queue: every dispatch and staged copy is a
submission on the device's compute queue, each command buffer begins with a
barrier on earlier compute and transfer writes, and host access to a mapped
buffer first waits for the last submission that used it.  The checks,
handles, program cache and waiting are `ironaccel.compute.ComputeDeviceBase`'s;
the Vulkan handles live in `DeviceState`.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.compute import ComputeDeviceBase, generation
from ironaccel.compute.execution import Command
from ironaccel.types import DType

from . import batches, spirv, spirv_val
from .binding import BACKEND, Binding
from .dispatch import submit
from .instance import Instance
from .memory import BUFFER_USAGE, PREFER_DEVICE_LOCAL, PREFER_HOST, PREFER_UNIFIED, Allocation, VulkanBuffer, copy_bytes
from .physical import PhysicalDeviceInfo
from .pipeline import PipelineState, VulkanPipeline, build, prepare
from .state import DeviceState
from .submission import VulkanSubmission
from .validation import Message

__all__ = ["VulkanDevice", "DEFAULT_STAGING_CHUNK"]

DEFAULT_STAGING_CHUNK = 32 << 20


def _teardown(state: DeviceState, opened_in: int) -> None:
    """The finalizer: destroy the device, except in a forked child (its driver state is the parent's)."""
    if generation() == opened_in:
        state.close()


class VulkanDevice(ComputeDeviceBase):
    """A ComputeDevice on one Vulkan physical device, with its own instance, device and compute queues.

    `memory` picks how the host reaches buffers: "auto" (mapped where device-local memory is
    host-visible, else staged), "mapped" (host-visible memory, one memcpy per transfer) or "staged"
    (device-local memory, chunked copies through a staging ring of `staging_chunk_bytes` per chunk).
    `queues`: how many queues of the compute family the device is made with (Vulkan makes them all up
    front), the default one and those `create_queue` hands out; default `state.DEFAULT_QUEUES` (fewer
    where the family has fewer), and one with the validation layer on.
    """

    backend = BACKEND
    supported_memory = ("device", "host", "upload", "readback")
    language = "SPIR-V"
    buffer_type = VulkanBuffer
    pipeline_type = VulkanPipeline
    submission_type = VulkanSubmission
    group_limit_name = "maxComputeWorkGroupCount"
    binding_limit_name = "maxPerStageDescriptorStorageBuffers"
    buffer_limit_name = "the smaller of maxBufferSize and the largest memory heap"

    def __init__(self, binding: Binding, instance: Instance, physical: Any, info: PhysicalDeviceInfo,
                 *, memory: str = "auto", staging_chunk_bytes: int = DEFAULT_STAGING_CHUNK, queues: int | None = None):
        self.info = info
        #: The memory kind of each allocation made with alloc(memory=...) other than the default.
        self._kinds: dict[int, str] = {}
        state = self._state = DeviceState(binding, instance, physical, info, memory_mode=memory,
                                          staging_chunk_bytes=staging_chunk_bytes, queues=queues)
        self._finalizer = weakref.finalize(self, _teardown, state, generation())
        self._buffer_prefer: Sequence[tuple[int, int]]
        if state.mapped:
            self._buffer_prefer = PREFER_UNIFIED if info.unified_memory else PREFER_HOST
        else:
            self._buffer_prefer = PREFER_DEVICE_LOCAL
        limit = min(state.limits["max_buffer_bytes"], max(s for s, _ in info.memory_heaps))
        self._open(info.descriptor(), max_buffer_bytes=limit, group_limits=state.limits["max_workgroup_count"],
                   max_buffers=state.limits["max_storage_buffers_per_stage"], lock=state.lock,
                   features=self._device_features(state))

    @staticmethod
    def _device_features(state: DeviceState) -> frozenset[str]:
        """What this device has of the execution model: batches always; timestamps where the compute queue
        family has valid timestamp bits; fences where timeline semaphores (Vulkan 1.2) are enabled."""
        found = {"batches", "typed_params", "constants", "map", "dlpack"}
        if state.queue_limit >= 2:
            found.add("queues")
        if state.timestamp_bits:
            found.add("timestamps")
        if "timelineSemaphore" in state.enabled_features:
            found.add("fences")
            if "VK_KHR_external_semaphore_fd" in state.extensions:
                found |= {"export_fence", "import_fence"}
        if "VK_KHR_external_memory_fd" in state.extensions:
            found |= {"export_memory", "import_memory"}
        return frozenset(found)

    def _unsupported_reason(self, feature: str) -> str:
        state = self._state
        if feature == "queues":
            family = state.info.compute_family()
            count = family.count if family is not None else 0
            if count > state.queue_count:
                layer = (" (the default with the validation layer on: its synchronization validation does not follow "
                         "timeline semaphores between queues)") if state.instance.validation_layer else ""
                return (f"{self.descriptor.name} was opened with {state.queue_count} queue(s){layer}; "
                        f"Backend.open(ordinal, queues=N) makes up to {count}")
            return (f"{self.descriptor.name}'s compute queue family (family {state.family}) has {count} queue(s); "
                    "another queue needs a family with more (ironaccel takes further queues from its compute family "
                    "only, so that a batch recorded once can be submitted on any of them)")
        if feature == "fences":
            return f"{self.descriptor.name} does not enable timelineSemaphore (Vulkan 1.2), which fences need"
        if feature in ("export_memory", "import_memory"):
            return f"{self.descriptor.name} lacks VK_KHR_external_memory_fd (or Vulkan 1.1)"
        if feature in ("export_fence", "import_fence"):
            return (f"{self.descriptor.name} lacks VK_KHR_external_semaphore_fd or timeline semaphores, which "
                    "fence hand-over needs")
        if feature == "timestamps":
            return f"{self.descriptor.name}'s compute queue family has no valid timestamp bits"
        return f"the Vulkan backend does not provide {feature!r} yet"

    # -- properties -----------------------------------------------------------------------------------------

    @property
    def _submitted(self) -> int:  # type: ignore[override]
        return self._state.timeline.submitted

    @property
    def _completed(self) -> int:  # type: ignore[override]
        return self._state.timeline.completed

    @property
    def memory_mode(self) -> str:
        """"mapped" or "staged": how uploads and downloads reach this device's buffers."""
        return self._state.memory_mode

    @property
    def limits(self) -> dict[str, Any]:
        """The device's compute limits (workgroup sizes and counts, buffer ranges, timestamp period); a copy."""
        return dict(self._state.limits)

    @property
    def spirv_validator(self) -> str:
        """The SPIRV-Tools validator that checks every module before the driver (see spirv_val)."""
        return spirv_val.validator_name()

    def stats(self) -> dict[str, int]:
        """Counters of driver work done so far: pipelines, descriptor sets, recordings, submits, allocations."""
        return dict(self._state.stats)

    def validation_messages(self) -> list[Message]:
        """Warnings and errors the loader and layers reported on this device's instance."""
        return self._state.instance.log.since(0)

    # -- memory ---------------------------------------------------------------------------------------------

    def _create_buffer(self, nbytes: int, dtype: DType, data: np.ndarray | None) -> Allocation:
        state = self._state
        op = "alloc" if data is None else "upload"
        alloc = state.create_allocation(nbytes, self._buffer_prefer, mapped=state.mapped, usage=BUFFER_USAGE, op=op)
        state.allocations[alloc.id] = alloc
        if data is not None:
            try:
                self._write_bytes(alloc, data)
            except BaseException:
                state.release(alloc)
                raise
        return alloc

    def _free_buffer(self, alloc: Allocation) -> None:
        self._kinds.pop(alloc.id, None)
        self._state.release(alloc)

    # -- memory kinds and mapping -------------------------------------------------------------------------

    def _create_memory(self, nbytes: int, dtype: DType, memory: str, exportable: bool) -> Allocation:
        """"device": the device's preferred memory (not promised host-visible, so never mapped); "host":
        host-visible coherent memory, device-local where the device has such (ReBAR, unified), mapped for
        its life and bindable; "upload" / "readback": host-visible staging memory, cached where possible."""
        state = self._state
        if exportable:
            from . import external
            alloc = external.create_exportable(state, nbytes, PREFER_DEVICE_LOCAL if memory == "device"
                                               else PREFER_UNIFIED, mapped=memory != "device")
        elif memory == "device":
            return self._create_buffer(nbytes, dtype, None)
        else:
            prefer = PREFER_UNIFIED if memory == "host" else PREFER_HOST
            alloc = state.create_allocation(nbytes, prefer, mapped=True, usage=BUFFER_USAGE, op="alloc")
        state.allocations[alloc.id] = alloc
        self._kinds[alloc.id] = memory
        return alloc

    def _export_memory(self, alloc: Allocation) -> tuple[int, int, bool]:
        from . import external

        return external.export_memory(self._state, alloc)

    def _import_memory(self, fd: int, nbytes: int, dtype: DType, ext: Any) -> Allocation:
        from . import external

        state = self._state
        alloc = external.import_memory(state, fd, nbytes, ext.size, ext.dedicated, state.mapped)
        state.allocations[alloc.id] = alloc
        return alloc

    def _export_fence(self, vf: Any) -> int:
        from . import external

        return external.export_semaphore(self._state, vf)

    def _import_fence(self, fd: int) -> Any:
        from . import external

        semaphore = batches.create_semaphore(self._state, 0)
        try:
            external.import_semaphore(self._state, semaphore, fd)
        except BaseException:
            self._state.semaphores.discard(semaphore)
            self._state.lib.vkDestroySemaphore(self._state.handle, semaphore, self._state.ffi.NULL)
            raise
        return semaphore

    def _memory_of(self, alloc: Allocation) -> tuple[bool, bool]:
        visible = self._kinds.get(alloc.id, "device") != "device" and alloc.view is not None
        return visible, visible

    def _map(self, alloc: Allocation, write: bool) -> Any:
        self._state.timeline.wait(alloc.last_serial)  # the device may still use it
        self._state.wait_idle_for(alloc)
        assert alloc.view is not None
        return alloc.view.ctypes.data  # coherent and mapped for the buffer's life

    def _write(self, alloc: Allocation, data: np.ndarray) -> None:
        if alloc.view is not None:
            self._state.timeline.wait(alloc.last_serial)  # the device may still be reading the old contents
        self._state.wait_idle_for(alloc)  # and another queue
        self._write_bytes(alloc, data)

    def _write_bytes(self, alloc: Allocation, data: np.ndarray) -> None:
        if alloc.view is not None:
            copy_bytes(alloc.view[: data.size], data)
        else:
            alloc.last_serial = self._state.staging.upload(alloc, data)

    def _read(self, alloc: Allocation, out: np.ndarray) -> None:
        self._state.wait_idle_for(alloc)  # what another queue writes into it
        if alloc.view is not None:
            self._state.timeline.wait(alloc.last_serial)
            copy_bytes(out, alloc.view[: out.size])
        else:
            self._state.staging.download(alloc, out)

    # -- compute --------------------------------------------------------------------------------------------

    def _prepare(self, code: Any, entry: str) -> tuple[np.ndarray, bytes]:
        return prepare(code)

    def _build(self, code: np.ndarray, entry: str, buffers: int, params: int,
               workgroup_size: tuple[int, int, int]) -> PipelineState:
        return build(self._state, code, entry, buffers, params)

    def _compile(self, code: Any, entry: str, buffers: int, params: int | None,
                 workgroup_size: tuple[int, int, int], constants: dict[str | int, Any]) -> Any:
        """`params` None: the module's push-constant block (or as many 32-bit words as it holds); `constants` by
        name or SpecId, passed as VkSpecializationInfo."""
        if params is None:
            info = spirv.reflect(code, "pipeline")
            block = info.push_block
            params = len(block.fields) if block is not None else ((info.push_constant_bytes or 0) + 3) // 4
        return build(self._state, code, entry, buffers, params, constants)

    def _launch(self, program: PipelineState, handles: list[Allocation], dims: tuple[int, int, int],
                params: bytes) -> int:
        return submit(self._state, program, handles, dims, params)

    def _wait(self, serial: int, seconds: float | None) -> bool:
        return self._state.timeline.wait(serial, seconds)

    # -- execution model: further queues of the compute family (each with its own Timeline) -------------------

    def _queue_limit(self) -> int:
        return self._state.queue_limit

    def _create_queue(self, priority: int) -> tuple[Any, int]:
        """A further queue of the compute family; priority 0: Vulkan fixes queue priorities when the device is
        created, and ironaccel creates every queue with the same one."""
        return self._state.open_queue(), 0

    def _destroy_queue(self, vq: Any) -> None:
        self._state.close_queue(vq)

    def _launch_on(self, vq: Any, program: Any, handles: list[Any], dims: tuple[int, int, int], params: Any) -> int:
        if vq is None:
            return self._launch(program, handles, dims, params)
        return batches.dispatch_on(self._state, vq, program, handles, dims, params)

    def _wait_on(self, vq: Any, serial: int, seconds: float | None) -> bool:
        return (self._state.timeline if vq is None else vq).wait(serial, seconds)

    def _last_serial(self, vq: Any) -> int:
        return (self._state.timeline if vq is None else vq).submitted

    # -- execution model: fences (timeline semaphores) and batches (see batches.py) --------------------------

    def _create_fence(self, value: int, exportable: bool) -> Any:
        return batches.create_semaphore(self._state, value, exportable)

    def _destroy_fence(self, vf: Any) -> None:
        state = self._state

        def destroy() -> None:
            if state.handle is not None and vf in state.semaphores:
                state.semaphores.discard(vf)
                state.lib.vkDestroySemaphore(state.handle, vf, state.ffi.NULL)

        state.after_all(destroy)  # a submission on any queue may still wait for or signal it

    def _fence_value(self, vf: Any) -> int:
        return batches.semaphore_value(self._state, vf)

    def _fence_wait(self, vf: Any, value: int, seconds: float | None) -> bool:
        return batches.semaphore_wait(self._state, vf, value, seconds)

    def _signal(self, vq: Any, vf: Any, value: int) -> None:
        batches.queue_op(self._state, [], [(vf, value)], vq)

    def _wait_fence(self, vq: Any, vf: Any, value: int) -> None:
        batches.queue_op(self._state, [(vf, value)], [], vq)

    def _record(self, commands: Sequence[Command], timestamps: bool) -> Any:
        rec = batches.record(self._state, commands, timestamps)
        return (rec, commands)

    def _update(self, rec: Any, index: int, command: Command) -> bool:
        """In place for a write (new data into its staging buffer) or a read (new `out`); a dispatch, copy or
        fill is re-recorded at the next submit."""
        return batches.update(rec[0], command)

    def _submit(self, vq: Any, rec: Any, waits: list[tuple[Any, int]], signals: list[tuple[Any, int]]) -> int:
        return batches.submit(self._state, rec[0], rec[1], waits, signals, vq)

    def _finish(self, rec: Any, serial: int) -> None:
        if self._state.handle is not None:
            batches.finish(self._state, rec[0], rec[1], serial)

    def _timings(self, rec: Any, serial: int) -> Sequence[tuple[float, float]]:
        return batches.timings(rec[0], serial)

    def _free_recording(self, rec: Any) -> None:
        batches.free(self._state, rec[0])

    def _shutdown(self) -> None:
        self._finalizer()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.memory_mode
        return f"<VulkanDevice {self.descriptor.ordinal}: {self.descriptor.name} ({state})>"
