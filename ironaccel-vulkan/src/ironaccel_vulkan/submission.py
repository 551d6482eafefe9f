"""Queue submissions as a timeline of serials, each with a recycled fence.

Every `vkQueueSubmit` gets the next serial; most also get a fence (staged
uploads do not: something fenced always follows them, and `wait` submits an
empty fenced batch if nothing has).  A fence signal covers all work submitted
before it on the queue, so waiting for serial S retires every serial up to S
at once; their fences go back to a free list.  Objects
record the serial of their last use, which is all it takes to know whether
they may be freed, re-recorded or read.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ironaccel.compute import Submission
from ironaccel.errors import InvalidArgument

from . import results
from .binding import BACKEND
from .physical import TYPE_CPU

if TYPE_CHECKING:
    from .state import DeviceState

__all__ = ["Timeline", "VulkanSubmission"]

VK_STRUCTURE_TYPE_FENCE_CREATE_INFO = 8
MAX_IN_FLIGHT = 256
MAX_UNFENCED = 32  # a run of unfenced submissions gets a fence at least this often
NO_TIMEOUT = 0xFFFFFFFFFFFFFFFF


#: How long (microseconds) a wait polls its fence before blocking, e.g. ``IRONACCEL_VULKAN_SPIN_US=0`` to always
#: block at once.  Default: `CPU_SPIN_US` on a CPU device (lavapipe) with two or more usable cores, 0 on a GPU.
ENV_SPIN = "IRONACCEL_VULKAN_SPIN_US"
#: lavapipe runs a submission on its queue thread and signals the fence from there; a waiter blocked in
#: vkWaitForFences sleeps, and waking it takes a thread wake-up (slow next to short work, most of all on a small
#: VM whose other vCPU idles), which polling saves for short work.
CPU_SPIN_US = 200.0
#: A wait that still blocks this many poll times after its poll was long: the work it waits for (a batch of many
#: dispatches) outlasts any poll, and polling slows a CPU device whose threads run the work.
LONG_WAIT = 3.0


def spin_seconds(device_type: int) -> float:
    """The poll-before-block time of a wait on a device of this VkPhysicalDeviceType, in seconds."""
    text = os.environ.get(ENV_SPIN, "").strip()
    if text:
        try:
            micros = float(text)
        except ValueError:
            micros = -1.0
        if not 0 <= micros < float("inf"):
            raise InvalidArgument(BACKEND, "vkCreateDevice", detail=f"{ENV_SPIN}={text!r}: give microseconds, "
                                  "a finite number >= 0")
        return micros / 1e6
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return CPU_SPIN_US / 1e6 if device_type == TYPE_CPU and cores >= 2 else 0.0


class Timeline:
    """Serials, fences and deferred work of one queue (`queue`: a VkQueue; the device's compute queue if None)."""

    def __init__(self, core: DeviceState, queue: Any = None):
        self.core = core
        self.queue = core.queue if queue is None else queue
        self.index = 0  # the queue's index in its family
        self.ffi, self.lib = core.ffi, core.lib
        self.submitted = 0
        self.completed = 0
        self.fenced = 0  # the serial of the last fenced submission
        #: Seconds a wait polls its fence before it blocks in vkWaitForFences (see `spin_seconds`), unless the
        #: last wait that blocked was long (`long_waits`: then the next one blocks at once, and polls again once
        #: a wait is short).
        self.spin = spin_seconds(core.info.device_type)
        self.long_waits = False
        self.in_flight: deque[tuple[int, Any]] = deque()
        self.free: list[Any] = []
        self.deferred: deque[tuple[int, Callable[[], None]]] = deque()
        self._fence_ptr = self.ffi.new("VkFence[1]")
        self._fence_array = self.ffi.new("VkFence[]", MAX_IN_FLIGHT)
        self._fence_info = self.ffi.new("VkFenceCreateInfo*", {"sType": VK_STRUCTURE_TYPE_FENCE_CREATE_INFO})

    def _fence(self) -> Any:
        if not self.free:
            self.poll()
        if self.free:
            return self.free.pop()
        if len(self.in_flight) >= MAX_IN_FLIGHT:
            self.wait(self.in_flight[0][0])
            return self.free.pop()
        out = self.ffi.new("VkFence*")
        results.check("vkCreateFence", self.lib.vkCreateFence(self.core.handle, self._fence_info, self.ffi.NULL, out))
        self.core.stats["fences_created"] += 1
        return out[0]

    def submit(self, submit_info: Any, fenced: bool = True) -> int:
        """Submit one prebuilt VkSubmitInfo (or an empty batch, for None); returns its serial."""
        if not fenced and self.submitted - self.fenced < MAX_UNFENCED:
            fence = self.ffi.NULL
        else:
            fenced, fence = True, self._fence()
        result = self.lib.vkQueueSubmit(self.queue, 0 if submit_info is None else 1,
                                        self.ffi.NULL if submit_info is None else submit_info, fence)
        if result:
            if fenced:
                self.free.append(fence)
            results.raise_for("vkQueueSubmit", result)
        self.submitted += 1
        if fenced:
            self.in_flight.append((self.submitted, fence))
            self.fenced = self.submitted
        self.core.stats["submits"] += 1
        return self.submitted

    def _cover(self, serial: int) -> None:
        """Make sure a fence follows `serial`: submit an empty fenced batch if none does yet."""
        if serial > self.fenced:
            self.submit(None)

    def poll(self) -> int:
        """Retire whatever has finished, without blocking; returns the completed serial."""
        get_status = self.lib.vkGetFenceStatus
        device = self.core.handle
        done = 0
        for serial, fence in self.in_flight:
            status = get_status(device, fence)
            if status == results.VK_SUCCESS:
                done = serial  # this one and every earlier one have finished
                continue
            if status != results.VK_NOT_READY:
                results.raise_for("vkGetFenceStatus", status)
            break
        if done:
            self._retire(done)
        return self.completed

    def is_done(self, serial: int) -> bool:
        if serial <= self.completed:
            return True
        self._cover(serial)
        return serial <= self.poll()

    def wait(self, serial: int, timeout: float | None = None) -> bool:
        """Block until `serial` has finished; False if `timeout` seconds (at most ~584 years) passed first."""
        if serial <= self.completed:
            return True
        self._cover(serial)
        for s, fence in self.in_flight:
            if s >= serial:
                self._fence_ptr[0] = fence
                spun = self.spin and timeout != 0 and not self.long_waits
                if spun:
                    spin = self.spin if timeout is None else min(self.spin, timeout)
                    if self._spin(fence, spin):
                        self._retire(s, waited=True)
                        return True
                    if timeout is not None:
                        timeout -= spin
                ns = NO_TIMEOUT if timeout is None else min(max(0, int(timeout * 1e9)), NO_TIMEOUT - 1)
                started = time.perf_counter()
                result = self.lib.vkWaitForFences(self.core.handle, 1, self._fence_ptr, 1, ns)
                if result == results.VK_TIMEOUT:
                    return False
                if result:
                    results.raise_for("vkWaitForFences", result)
                if self.spin and timeout != 0:  # long: a poll would not have caught it, and takes a core the
                    # device's threads need
                    blocked = time.perf_counter() - started
                    self.long_waits = blocked > LONG_WAIT * self.spin if spun else blocked > self.spin
                self._retire(s, waited=True)
                return True
        return True

    def _spin(self, fence: Any, seconds: float) -> bool:
        """Poll `fence` for up to `seconds`; True once it has signalled."""
        get_status, device = self.lib.vkGetFenceStatus, self.core.handle
        clock = time.perf_counter
        deadline = clock() + seconds
        while True:
            status = get_status(device, fence)
            if status == results.VK_SUCCESS:
                return True
            if status != results.VK_NOT_READY:
                results.raise_for("vkGetFenceStatus", status)
            if clock() >= deadline:
                return False

    def _retire(self, serial: int, waited: bool = False) -> None:
        """Recycle the fences up to `serial` (signalled: `serial` was waited for or polled done)."""
        retired = []
        while self.in_flight and self.in_flight[0][0] <= serial:
            retired.append(self.in_flight.popleft()[1])
        if len(retired) == 1 and waited:  # the common case: the fence just waited for, still in _fence_ptr
            results.check("vkResetFences", self.lib.vkResetFences(self.core.handle, 1, self._fence_ptr))
            self.free.append(retired[0])
        elif retired:
            fences = self._fence_array
            for i, fence in enumerate(retired):
                fences[i] = fence
            # Earlier fences are covered by the later signal; this wait returns at once.
            results.check("vkWaitForFences", self.lib.vkWaitForFences(self.core.handle, len(retired), fences, 1,
                                                                      NO_TIMEOUT))
            results.check("vkResetFences", self.lib.vkResetFences(self.core.handle, len(retired), fences))
            self.free.extend(retired)
        self.completed = max(self.completed, serial)
        while self.deferred and self.deferred[0][0] <= self.completed:
            self.deferred.popleft()[1]()

    def defer(self, serial: int, action: Callable[[], None]) -> None:
        """Run `action` once `serial` has finished (now, if it has)."""
        if serial <= self.completed:
            action()
        elif self.deferred and self.deferred[-1][0] > serial:
            items = sorted([*self.deferred, (serial, action)], key=lambda item: item[0])
            self.deferred = deque(items)
        else:
            self.deferred.append((serial, action))

    def destroy(self) -> None:
        """Destroy every fence (the device must be idle) and run what was deferred."""
        destroy = self.lib.vkDestroyFence
        for _, fence in self.in_flight:
            destroy(self.core.handle, fence, self.ffi.NULL)
        for fence in self.free:
            destroy(self.core.handle, fence, self.ffi.NULL)
        self.in_flight.clear()
        self.free.clear()
        self.completed = self.submitted
        while self.deferred:
            self.deferred.popleft()[1]()


class VulkanSubmission(Submission):
    """Work handed to the queue: `wait(timeout)` blocks until it (and everything before it) has finished."""

    __slots__ = ()
