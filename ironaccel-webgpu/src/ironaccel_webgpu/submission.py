"""Waiting for submitted work: a fence made of a mapped buffer, made only when someone waits.

wgpu-py 0.32's `queue.on_submitted_work_done` is unusable (its callback type
does not match wgpu-native's), so completion is observed the portable way: a
tiny MAP_READ buffer is cleared in a new submission and mapped; the map
resolves when that submission, and so every submission before it, has
finished.  A fence is only made when someone waits, so `dispatch` itself costs
nothing extra.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ironaccel.compute import Submission
from ironaccel.errors import DriverError

from .memory import map_for_read

if TYPE_CHECKING:
    from .device import WebGPUDevice

BACKEND = "webgpu"
FENCE_BYTES = 4


def settle(promise: Any, timeout: float | None) -> bool:
    """Wait for a wgpu promise; False if `timeout` seconds passed first.

    wgpu-py's native backend resolves promises from its per-device poll thread
    and sets a threading.Event; with no such event (another wgpu backend) the
    wait is unbounded.
    """
    event = getattr(promise, "_thread_event", None)
    if timeout is not None and event is not None and not event.wait(timeout):
        return False
    promise.sync_wait()
    return True


class Fence:
    """Completion of everything submitted up to `serial`."""

    __slots__ = ("serial", "_buffer", "_promise")

    def __init__(self, device: WebGPUDevice, buffer: Any, serial: int):
        self.serial = serial
        self._buffer = buffer
        encoder = device.gpu.create_command_encoder()
        encoder.clear_buffer(buffer, 0, FENCE_BYTES)
        device.gpu_queue.submit([encoder.finish()])
        self._promise = map_for_read(buffer, device.wgpu, FENCE_BYTES)

    def settle(self, timeout: float | None) -> bool:
        try:
            if not settle(self._promise, timeout):
                return False
        except Exception as exc:  # a failed map means the device was lost
            raise DriverError(BACKEND, "wgpuBufferMapAsync", code_name=type(exc).__name__,
                              detail=f"waiting for submitted work failed: {exc}") from None
        self._buffer.unmap()
        return True


class Completion:
    """Which submissions of one device have finished, observed through fences made on demand."""

    def __init__(self, device: WebGPUDevice):
        self._device = device
        self._fence: Fence | None = None
        self._buffer: Any = None

    def wait(self, serial: int, timeout: float | None) -> bool:
        """Wait until submission `serial` has finished; False if `timeout` seconds passed first."""
        device = self._device
        deadline = None if timeout is None else time.monotonic() + timeout
        while serial > device._completed:
            fence = self._fence
            if fence is None:
                if self._buffer is None:
                    wgpu = device.wgpu
                    self._buffer = device.gpu.create_buffer(
                        size=FENCE_BYTES, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
                fence = self._fence = Fence(device, self._buffer, device._submitted)
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not fence.settle(remaining):
                return False
            self._fence = None
            device._completed = max(device._completed, fence.serial)
        return True

    def release(self) -> None:
        if self._buffer is not None:
            self._buffer.destroy()
            self._buffer = None
        self._fence = None


class WebGPUSubmission(Submission):
    """One dispatch: `wait(timeout)` blocks until it (and everything before it) has finished."""

    __slots__ = ()
