"""Waiting for dispatched work: GL fence syncs made on demand.

A fence (glFenceSync) is only inserted when someone waits or asks done(), so a
dispatch costs nothing extra; glClientWaitSync with the flush bit then waits
for it, and so for everything issued before it.  Without the GL sync entry
points (a moderngl that does not expose its loader) the fallback is glFinish.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ironaccel.compute import Submission
from ironaccel.errors import DriverError

from .context import GLCalls

if TYPE_CHECKING:
    from .device import OpenGLDevice

BACKEND = "opengl"
_SLICE_NS = 100_000_000  # unbounded waits wait in 0.1 s slices


class Completion:
    """Which dispatches of one device have finished, observed through a GL fence made on demand."""

    def __init__(self, device: OpenGLDevice, calls: GLCalls):
        self._device = device
        self._calls = calls
        self._fence: Any = None  # GLsync handle
        self._fence_serial = 0

    def wait(self, serial: int, timeout: float | None) -> bool:
        """Wait until dispatch `serial` has finished; False if `timeout` seconds passed first.  The device's
        context is current."""
        device = self._device
        calls = self._calls
        if not calls.available:
            device.ctx.finish()
            device._completed = device._submitted
            return True
        if self._fence is None or self._fence_serial < serial:
            self._drop_fence()
            self._fence = calls.fence_sync(GLCalls.GL_SYNC_GPU_COMMANDS_COMPLETE, 0)
            self._fence_serial = device._submitted
            if not self._fence:
                raise DriverError(BACKEND, "glFenceSync", detail="returned no sync object")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if deadline is None:
                wait_ns = _SLICE_NS
            else:
                wait_ns = max(0, int((deadline - time.monotonic()) * 1e9))
            status = calls.client_wait_sync(self._fence, GLCalls.GL_SYNC_FLUSH_COMMANDS_BIT, wait_ns)
            if status in (GLCalls.GL_ALREADY_SIGNALED, GLCalls.GL_CONDITION_SATISFIED):
                device._completed = max(device._completed, self._fence_serial)
                self._drop_fence()
                return True
            if status == GLCalls.GL_WAIT_FAILED:
                raise DriverError(BACKEND, "glClientWaitSync", code=status, code_name="GL_WAIT_FAILED")
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def _drop_fence(self) -> None:
        if self._fence is not None:
            self._calls.delete_sync(self._fence)
            self._fence = None

    def release(self) -> None:
        """The device is closing (its context still current): all work is finished."""
        self._drop_fence()


class OpenGLSubmission(Submission):
    """One dispatch: `wait(timeout)` blocks until it (and everything before it) has finished."""

    __slots__ = ()
