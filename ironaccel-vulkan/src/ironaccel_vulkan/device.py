"""VulkanDevice: the ComputeDevice protocol on one Vulkan device.

    dev = ironaccel.open("vulkan", 0)
    x = dev.upload(np.arange(1024, dtype=np.float32))
    y = dev.alloc(1024, "float32")
    p = dev.pipeline(spirv_bytes, buffers=2, params=3)
    dev.dispatch(p, [x, y], 16, (np.float32(2), np.float32(1), np.uint32(1024))).wait()
    dev.download(y)

Ordering is that of one in-order queue: every dispatch and staged copy is a
submission on the device's compute queue, each command buffer begins with a
barrier on earlier compute and transfer writes, and host access to a mapped
buffer first waits for the last submission that used it.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ironaccel.compute import element_type, host_array
from ironaccel.errors import InvalidArgument
from ironaccel.types import DeviceDescriptor, DType

from .binding import BACKEND, Binding
from .core import DeviceCore
from .dispatch import dispatch
from .instance import Instance
from .memory import BUFFER_USAGE, PREFER_DEVICE_LOCAL, PREFER_HOST, PREFER_UNIFIED, VulkanBuffer, copy_bytes, own
from .physical import PhysicalDeviceInfo
from .pipeline import VulkanPipeline, build_pipeline
from .submission import VulkanSubmission
from .validation import Message

__all__ = ["VulkanDevice", "DEFAULT_STAGING_CHUNK"]

DEFAULT_STAGING_CHUNK = 32 << 20


class VulkanDevice:
    """A ComputeDevice on one Vulkan physical device, with its own instance, device and compute queue.

    `memory` picks how the host reaches buffers: "auto" (mapped where device-local memory is
    host-visible, else staged), "mapped" (host-visible memory, one memcpy per transfer) or "staged"
    (device-local memory, chunked copies through a staging ring of `staging_chunk_bytes` per chunk).
    """

    def __init__(self, binding: Binding, instance: Instance, physical: Any, info: PhysicalDeviceInfo,
                 *, memory: str = "auto", staging_chunk_bytes: int = DEFAULT_STAGING_CHUNK):
        self.descriptor: DeviceDescriptor = info.descriptor()
        self.info = info
        self._core = DeviceCore(binding, instance, physical, info, memory_mode=memory,
                                staging_chunk_bytes=staging_chunk_bytes)
        self._finalizer = weakref.finalize(self, self._core.close)
        core = self._core
        self._buffer_prefer: Sequence[tuple[int, int]]
        if core.mapped:
            self._buffer_prefer = PREFER_UNIFIED if info.unified_memory else PREFER_HOST
        else:
            self._buffer_prefer = PREFER_DEVICE_LOCAL

    # -- properties -----------------------------------------------------------------------------------------

    @property
    def memory_mode(self) -> str:
        """"mapped" or "staged": how uploads and downloads reach this device's buffers."""
        return self._core.memory_mode

    @property
    def closed(self) -> bool:
        return self._core.closed

    @property
    def limits(self) -> dict[str, Any]:
        return dict(self._core.limits)

    def stats(self) -> dict[str, int]:
        """Counters of driver work done so far: pipelines, descriptor sets, recordings, submits, allocations."""
        return dict(self._core.stats)

    def validation_messages(self) -> list[Message]:
        """Warnings and errors the loader and layers reported on this device's instance."""
        return self._core.instance.log.since(0)

    # -- memory ---------------------------------------------------------------------------------------------

    def _new_buffer(self, nbytes: int, dtype: DType, size: int, op: str) -> VulkanBuffer:
        core = self._core
        limit = min(core.limits["max_buffer_bytes"], max(s for s, _ in core.info.memory_heaps))
        if not 0 < nbytes <= limit:
            raise InvalidArgument(BACKEND, op, detail=f"{size} x {dtype.value} = {nbytes} bytes; "
                                  f"a buffer holds 1..{limit} bytes here")
        alloc = core.create_allocation(nbytes, self._buffer_prefer, mapped=core.mapped, usage=BUFFER_USAGE, op=op)
        core.allocations[alloc.id] = alloc
        return VulkanBuffer(core, alloc, dtype, size)

    def alloc(self, size: int, dtype: Any = "float32") -> VulkanBuffer:
        """A new buffer of `size` elements of `dtype`; contents undefined."""
        core = self._core
        with core.lock:
            core.check_open("alloc")
            if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
                raise InvalidArgument(BACKEND, "alloc", detail=f"size must be an int, got {size!r}")
            dt = element_type(BACKEND, dtype, "alloc")
            return self._new_buffer(int(size) * dt.itemsize, dt, int(size), "alloc")

    def upload(self, array: Any) -> VulkanBuffer:
        """A new buffer holding a copy of a C-contiguous numpy array (flattened)."""
        core = self._core
        with core.lock:
            core.check_open("upload")
            data = host_array(BACKEND, array, "upload")
            dt = element_type(BACKEND, data.dtype, "upload")
            buf = self._new_buffer(data.nbytes, dt, data.size, "upload")
            self._write(buf._alloc, _bytes_of(data))
            return buf

    def write(self, buffer: VulkanBuffer, array: Any) -> None:
        """Copy a C-contiguous array into the start of an existing buffer, after the work before it."""
        core = self._core
        with core.lock:
            core.check_open("write")
            alloc = own(core, buffer, "write")
            data = host_array(BACKEND, array, "write")
            if data.nbytes > alloc.nbytes:
                raise InvalidArgument(BACKEND, "write", detail=f"{data.nbytes} bytes into a buffer of {alloc.nbytes}")
            if alloc.view is not None:
                core.timeline.wait(alloc.last_serial)  # the device may still be reading the old contents
            self._write(alloc, _bytes_of(data))

    def _write(self, alloc: Any, src: np.ndarray) -> None:
        if alloc.view is not None:
            copy_bytes(alloc.view[: src.size], src)
        else:
            alloc.last_serial = self._core.staging.upload(alloc, src)

    def download(self, buffer: VulkanBuffer, out: Any = None) -> np.ndarray:
        """The buffer's contents as a new array, or its first out.nbytes bytes into `out`; waits for prior work."""
        core = self._core
        with core.lock:
            core.check_open("download")
            alloc = own(core, buffer, "download")
            if out is None:
                out = np.empty(buffer.size, buffer.dtype.numpy)
            else:
                if not isinstance(out, np.ndarray):
                    raise InvalidArgument(BACKEND, "download", detail=f"out must be a numpy array, got {type(out)}")
                if not out.flags.c_contiguous or not out.flags.writeable:
                    raise InvalidArgument(BACKEND, "download", detail="out must be C-contiguous and writeable")
                if out.nbytes > alloc.nbytes:
                    raise InvalidArgument(BACKEND, "download", detail=f"out holds {out.nbytes} bytes, the buffer "
                                          f"{alloc.nbytes}")
            dst = _bytes_of(out)
            if alloc.view is not None:
                core.timeline.wait(alloc.last_serial)
                copy_bytes(dst, alloc.view[: dst.size])
            elif dst.size:
                core.staging.download(alloc, dst)
            return out

    # -- compute --------------------------------------------------------------------------------------------

    def pipeline(self, code: str | bytes | Sequence[int], entry: str = "main", *, buffers: int, params: int = 0,
                 workgroup_size: tuple[int, int, int] = (64, 1, 1)) -> VulkanPipeline:
        """A pipeline from SPIR-V (bytes or uint32 words); the code declares its own workgroup size.

        Built once per (code, entry, buffers, params) on this device and shared.
        """
        core = self._core
        with core.lock:
            core.check_open("pipeline")
            state = build_pipeline(core, code, entry, buffers, params)
            return VulkanPipeline(core, state)

    def dispatch(self, pipeline: VulkanPipeline, buffers: Sequence[VulkanBuffer], groups: int | tuple[int, ...],
                 params: Sequence[Any] = ()) -> VulkanSubmission:
        """Queue `pipeline` over `groups` workgroups; returns at once with a Submission to wait on."""
        core = self._core
        with core.lock:
            core.check_open("dispatch")
            return VulkanSubmission(core, dispatch(core, pipeline, buffers, groups, params))

    def synchronize(self) -> None:
        """Wait for everything submitted so far."""
        core = self._core
        with core.lock:
            core.check_open("synchronize")
            core.timeline.wait_all()

    def close(self) -> None:
        """Wait for the queue and destroy everything the device created; a second call is a no-op."""
        self._finalizer()

    def __enter__(self) -> VulkanDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.memory_mode
        return f"<VulkanDevice {self.descriptor.ordinal}: {self.descriptor.name} ({state})>"


def _bytes_of(data: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a C-contiguous array."""
    return (data if data.ndim == 1 else data.reshape(-1)).view(np.uint8)
