"""Waiting for dispatched work: serial numbers per device and GL fence syncs made on demand.

A fence (glFenceSync) is only inserted when someone waits or asks done(), so a
dispatch costs nothing extra; glClientWaitSync with the flush bit then waits
for it, and so for everything issued before it.  Without the GL sync entry
points (a moderngl that does not expose its loader) the fallback is glFinish.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ironaccel.errors import DriverError

from .context import GLCalls

if TYPE_CHECKING:
    from .device import OpenGLDevice

BACKEND = "opengl"
_SLICE_NS = 100_000_000  # unbounded waits wait in 0.1 s slices


class Completion:
    """Tracks which dispatches of one device have finished."""

    def __init__(self, device: OpenGLDevice, calls: GLCalls):
        self._device = device
        self._calls = calls
        self.submitted = 0
        self.completed = 0
        self._fence: Any = None  # GLsync handle
        self._fence_serial = 0

    def reach(self, serial: int, timeout: float | None) -> bool:
        """Wait until dispatch `serial` has finished; False on timeout."""
        if serial <= self.completed:
            return True
        device = self._device
        device._enter("wait")
        calls = self._calls
        if not calls.available:
            device.ctx.finish()
            self.completed = self.submitted
            return True
        if self._fence is None or self._fence_serial < serial:
            self._drop_fence()
            self._fence = calls.fence_sync(GLCalls.GL_SYNC_GPU_COMMANDS_COMPLETE, 0)
            self._fence_serial = self.submitted
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
                self.completed = max(self.completed, self._fence_serial)
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
        self.completed = self.submitted


class Submission:
    """One dispatch: wait() blocks until it (and everything before it) has finished."""

    __slots__ = ("_completion", "serial")

    def __init__(self, completion: Completion, serial: int):
        self._completion = completion
        self.serial = serial

    def wait(self, timeout: float | None = None) -> None:
        """Block until done; TimeoutError after `timeout` seconds."""
        if self.serial > self._completion.completed and not self._completion.reach(self.serial, timeout):
            raise TimeoutError(f"opengl: dispatch {self.serial} not finished after {timeout} s")

    def done(self) -> bool:
        return self.serial <= self._completion.completed or self._completion.reach(self.serial, 0.0)

    def __repr__(self) -> str:
        return f"<opengl Submission {self.serial}{' done' if self.serial <= self._completion.completed else ''}>"
