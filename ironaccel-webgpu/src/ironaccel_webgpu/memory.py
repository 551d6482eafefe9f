"""Storage buffers of a WebGPU device, and the reusable staging buffer that downloads go through.

WebGPU wants buffer sizes and copy sizes in multiples of 4 bytes, so the device
buffer is padded up to that; `nbytes` stays the size the caller asked for.
"""

from __future__ import annotations

import itertools
from typing import Any

from ironaccel.compute import BufferHandle

COPY_ALIGN = 4
#: Staging buffers up to this size are kept for the next download; larger ones are freed after use.
KEEP_STAGING_BYTES = 256 << 20
_serials = itertools.count(1)


def padded(nbytes: int) -> int:
    """`nbytes` rounded up to WebGPU's copy alignment."""
    return (nbytes + COPY_ALIGN - 1) & ~(COPY_ALIGN - 1)


class Storage:
    """The vendor side of a WebGPUBuffer: the wgpu GPUBuffer and the cached bind groups that use it."""

    __slots__ = ("gpu", "nbytes", "padded_nbytes", "serial", "bind_keys", "kind")

    def __init__(self, gpu_buffer: Any, nbytes: int, kind: str = "device"):
        self.gpu = gpu_buffer
        #: The memory kind: "device" (storage), "upload" (MAP_WRITE | COPY_SRC) or "readback" (MAP_READ | COPY_DST).
        self.kind = kind
        self.nbytes = nbytes
        self.padded_nbytes = padded(nbytes)
        self.serial = next(_serials)  # identifies the buffer in bind-group keys (ids get reused)
        self.bind_keys: list[tuple[Any, tuple[int, ...]]] = []


class WebGPUBuffer(BufferHandle):
    """A storage buffer: `size` elements of `dtype`, on one device (padded to whole words there)."""

    __slots__ = ("padded_nbytes",)

    def __init__(self, device: Any, handle: Storage, dtype: Any, size: int):
        super().__init__(device, handle, dtype, size)
        self.padded_nbytes = handle.padded_nbytes


def map_for_read(buffer: Any, wgpu: Any, nbytes: int, offset: int = 0) -> Any:
    """Start mapping `buffer` for reading; returns wgpu's promise.

    The buffer was just written by a copy in its own submission, so wgpu-py's
    workaround for never-used buffers (an extra empty submit before every read
    map) is skipped with its "READ_NOSYNC" mode where
    this wgpu-py has it.
    """
    global _NOSYNC
    if _NOSYNC:
        try:
            return buffer.map_async("READ_NOSYNC", offset, nbytes)
        except (ValueError, KeyError, TypeError, AttributeError):
            _NOSYNC = False
    return buffer.map_async(wgpu.MapMode.READ, offset, nbytes)


_NOSYNC = True


class Staging:
    """A MAP_READ buffer reused by downloads, grown to the largest download up to KEEP_STAGING_BYTES."""

    def __init__(self, wgpu: Any, device: Any):
        self._wgpu = wgpu
        self._device = device
        self._buffer: Any = None
        self._size = 0

    def get(self, nbytes: int) -> tuple[Any, bool]:
        """A staging buffer of at least `nbytes`; the bool says whether to destroy it after use."""
        if nbytes <= self._size:
            return self._buffer, False
        usage = self._wgpu.BufferUsage.MAP_READ | self._wgpu.BufferUsage.COPY_DST
        if nbytes > KEEP_STAGING_BYTES:
            return self._device.create_buffer(size=nbytes, usage=usage), True
        size = max(nbytes, min(KEEP_STAGING_BYTES, 2 * self._size), 1 << 16)
        buffer = self._device.create_buffer(size=size, usage=usage)
        self.release()
        self._buffer, self._size = buffer, size
        return buffer, False

    def release(self) -> None:
        if self._buffer is not None:
            self._buffer.destroy()
            self._buffer, self._size = None, 0
