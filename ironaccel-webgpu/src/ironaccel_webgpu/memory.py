"""Storage buffers of a WebGPU device, and the reusable staging buffer that downloads go through.

WebGPU wants buffer sizes and copy sizes in multiples of 4 bytes, so the device
buffer is padded up to that; `nbytes` stays the size the caller asked for.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from ironaccel.types import DType

if TYPE_CHECKING:
    from .device import WebGPUDevice

COPY_ALIGN = 4
#: Staging buffers up to this size are kept for the next download; larger ones are freed after use.
KEEP_STAGING_BYTES = 256 << 20
_serials = itertools.count(1)


def padded(nbytes: int) -> int:
    """`nbytes` rounded up to WebGPU's copy alignment."""
    return (nbytes + COPY_ALIGN - 1) & ~(COPY_ALIGN - 1)


class WebGPUBuffer:
    """A storage buffer: `size` elements of `dtype`, on one device."""

    __slots__ = ("dtype", "size", "nbytes", "padded_nbytes", "handle", "serial", "_device", "_bind_keys", "__weakref__")

    def __init__(self, device: WebGPUDevice, handle: Any, dtype: DType, size: int):
        self._device = device
        self.handle: Any = handle  # the wgpu GPUBuffer; None once closed
        self.serial = next(_serials)  # identifies the buffer in bind-group keys (ids get reused)
        self.dtype = dtype
        self.size = size
        self.nbytes = size * dtype.itemsize
        self.padded_nbytes = padded(self.nbytes)
        self._bind_keys: list[tuple[Any, tuple[int, ...]]] = []  # cached bind groups that use this buffer

    @property
    def device(self) -> WebGPUDevice:
        return self._device

    @property
    def closed(self) -> bool:
        """True once this buffer or its device is closed."""
        return self.handle is None or self._device.closed

    def close(self) -> None:
        """Free the device memory; closing twice is a no-op."""
        handle, self.handle = self.handle, None
        if handle is None:
            return
        for program, key in self._bind_keys:
            program.bind_groups.pop(key, None)
        self._bind_keys.clear()
        if not self._device.closed:  # a destroyed device has freed its buffers already
            handle.destroy()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit wgpu may already be gone
            pass

    def __repr__(self) -> str:
        state = "closed" if self.handle is None else f"{self.nbytes} bytes"
        return f"<WebGPUBuffer {self.dtype.value}[{self.size}] {state}>"


def map_for_read(buffer: Any, wgpu: Any, nbytes: int) -> Any:
    """Start mapping `buffer` for reading; returns wgpu's promise.

    The buffer was just written by a copy in its own submission, so wgpu-py's
    workaround for never-used buffers (an extra empty submit before every read
    map, about 0.1 ms on llvmpipe) is skipped with its "READ_NOSYNC" mode where
    this wgpu-py has it.
    """
    global _NOSYNC
    if _NOSYNC:
        try:
            return buffer.map_async("READ_NOSYNC", 0, nbytes)
        except (ValueError, KeyError, TypeError, AttributeError):
            _NOSYNC = False
    return buffer.map_async(wgpu.MapMode.READ, 0, nbytes)


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
