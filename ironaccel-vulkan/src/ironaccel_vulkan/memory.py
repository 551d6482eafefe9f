"""Device memory: buffers, memory-type choice, host copies and the staging ring.

Two ways to reach a buffer from the host:

* mapped: the buffer lives in host-visible, coherent memory that stays mapped
  for its lifetime; upload and download are one memcpy.  This is the fast path
  wherever device-local memory is host-visible (lavapipe, integrated GPUs), and
  an explicit choice (`memory="mapped"`) on a discrete GPU, where the memory is
  system RAM read over the bus.
* staged: the buffer is device-local; transfers go through a ring of two
  host-visible staging buffers in chunks, so the memcpy of one chunk overlaps
  the DMA of the other.  The default on discrete GPUs.

Large host copies are split over a few threads (numpy releases the GIL), since
one core's memcpy is slower than the bus.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ironaccel.compute import BufferHandle

from .physical import (
    MEMORY_DEVICE_LOCAL,
    MEMORY_HOST_CACHED,
    MEMORY_HOST_COHERENT,
    MEMORY_HOST_VISIBLE,
    PhysicalDeviceInfo,
)

if TYPE_CHECKING:
    from .state import DeviceState

__all__ = ["Allocation", "next_id", "VulkanBuffer", "StagingRing", "copy_bytes", "choose_memory_type", "MEMORY_MODES"]

_ids = itertools.count(1)


def next_id() -> int:
    """A fresh allocation id (shared by every allocation, external ones included)."""
    return next(_ids)

MEMORY_MODES = ("auto", "mapped", "staged")
BUFFER_USAGE = 0x20 | 0x1 | 0x2  # STORAGE | TRANSFER_SRC | TRANSFER_DST
STAGING_USAGE = 0x1 | 0x2
PARALLEL_COPY_BYTES = 4 << 20

_HV_HC = MEMORY_HOST_VISIBLE | MEMORY_HOST_COHERENT
# (required, forbidden) flag pairs, most preferred first
PREFER_DEVICE_LOCAL = ((MEMORY_DEVICE_LOCAL, MEMORY_HOST_VISIBLE), (MEMORY_DEVICE_LOCAL, 0), (0, 0))
PREFER_UNIFIED = ((MEMORY_DEVICE_LOCAL | _HV_HC | MEMORY_HOST_CACHED, 0), (MEMORY_DEVICE_LOCAL | _HV_HC, 0),
                  (_HV_HC | MEMORY_HOST_CACHED, 0), (_HV_HC, 0))
PREFER_HOST = ((_HV_HC | MEMORY_HOST_CACHED, MEMORY_DEVICE_LOCAL), (_HV_HC | MEMORY_HOST_CACHED, 0),
               (_HV_HC, MEMORY_DEVICE_LOCAL), (_HV_HC, 0))


def choose_memory_type(info: PhysicalDeviceInfo, type_bits: int, prefer: Sequence[tuple[int, int]]) -> int | None:
    """Index of the first memory type allowed by `type_bits` that meets a preference, in preference order."""
    for required, forbidden in prefer:
        for t in info.memory_types:
            if type_bits >> t.index & 1 and t.flags & required == required and not t.flags & forbidden:
                return t.index
    return None


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_WORKERS = max(1, min(8, os.cpu_count() or 1))


def copy_bytes(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[:] = src for two uint8 arrays; large copies run on several threads."""
    n = src.size
    if n < PARALLEL_COPY_BYTES or _WORKERS == 1:
        np.copyto(dst, src)
        return
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="ironaccel-vulkan-copy")
    parts = min(_WORKERS, n // (1 << 20))
    step = -(-n // parts) + 63 & ~63
    futures = [_pool.submit(np.copyto, dst[i: i + step], src[i: i + step]) for i in range(step, n, step)]
    np.copyto(dst[:step], src[:step])
    for f in futures:
        f.result()


class Allocation:
    """A VkBuffer bound to its own VkDeviceMemory; `view` is the persistent mapping, when mapped."""

    __slots__ = ("id", "buffer", "memory", "nbytes", "capacity", "view", "last_serial", "elsewhere", "dead",
                 "__weakref__")

    def __init__(self, id: int, buffer: Any, memory: Any, nbytes: int, capacity: int, view: np.ndarray | None):
        self.id = id
        self.buffer = buffer
        self.memory = memory
        self.nbytes = nbytes
        self.capacity = capacity  # the VkBuffer's size: nbytes rounded up to whole words
        self.view = view
        self.last_serial = 0  # on the device's default queue
        self.elsewhere: dict[Any, int] = {}  # Timeline of a further queue -> the serial of its last use there
        self.dead = False


class VulkanBuffer(BufferHandle):
    """A ComputeBuffer: `size` elements of `dtype` in one Vulkan buffer of its device (`handle`: its Allocation)."""

    __slots__ = ()

    @property
    def mapped(self) -> bool:
        """True when the host reaches this buffer through a persistent mapping."""
        return self.handle is not None and self.handle.view is not None


@dataclass
class StagingSlot:
    alloc: Allocation
    cmd: Any
    submit: Any  # prebuilt VkSubmitInfo*
    keep: Any
    serial: int = 0
    recorded: tuple[int, ...] = ()  # (direction, allocation id, offset, size) of the copy recorded in `cmd`


class StagingRing:
    """Two host-visible staging buffers used in turn, grown on demand up to `chunk_bytes` each."""

    SLOTS = 2

    def __init__(self, core: DeviceState, chunk_bytes: int):
        self.core = core
        self.chunk_bytes = chunk_bytes
        self.slots: list[StagingSlot] = []
        self.next = 0

    def ensure(self, nbytes: int) -> int:
        """Make every slot hold min(nbytes, chunk_bytes) at least; returns the chunk size to use."""
        want = min(max(nbytes, 1 << 16), self.chunk_bytes)
        if self.slots and self.slots[0].alloc.capacity >= want:
            return self.slots[0].alloc.capacity
        size = 1 << (want - 1).bit_length() if want < self.chunk_bytes else self.chunk_bytes
        for slot in self.slots:
            self.core.timeline.wait(slot.serial)
            self.core.destroy_allocation(slot.alloc)
            self.core.free_command_buffer(slot.cmd)
        self.slots = []
        for _ in range(self.SLOTS):
            alloc = self.core.create_allocation(size, PREFER_HOST, mapped=True, usage=STAGING_USAGE, op="staging")
            cmd = self.core.allocate_command_buffer()
            submit, keep = self.core.submit_info(cmd)
            self.slots.append(StagingSlot(alloc, cmd, submit, keep))
        return size

    def take(self) -> StagingSlot:
        """The next slot, once the copy that last used it has finished."""
        slot = self.slots[self.next]
        self.next = (self.next + 1) % len(self.slots)
        self.core.timeline.wait(slot.serial)
        return slot

    def upload(self, dst: Allocation, src: np.ndarray, dst_offset: int = 0) -> int:
        """Copy host bytes `src` into `dst` at `dst_offset`; returns the serial of the last copy (not waited)."""
        n = src.size
        chunk = self.ensure(n)
        serial = 0
        for start in range(0, n, chunk):
            size = min(chunk, n - start)
            slot = self.take()
            assert slot.alloc.view is not None
            copy_bytes(slot.alloc.view[:size], src[start: start + size])
            key = (0, dst.id, dst_offset + start, size)
            if slot.recorded != key:  # a repeated transfer resubmits the copy it recorded last time
                self.core.record_copy(slot.cmd, slot.alloc.buffer, 0, dst.buffer, dst_offset + start, size)
                slot.recorded = key
            serial = slot.serial = self.core.timeline.submit(slot.submit, fenced=False)
            self.core.stats["staged_copies"] += 1
        return serial

    def download(self, src: Allocation, dst: np.ndarray) -> None:
        """Copy the first dst.size bytes of `src` into host bytes `dst`, and wait for them."""
        n = dst.size
        chunk = self.ensure(n)
        pending: list[tuple[StagingSlot, int, int, int]] = []

        def finish() -> None:
            slot, start, size, serial = pending.pop(0)
            self.core.timeline.wait(serial)
            assert slot.alloc.view is not None
            copy_bytes(dst[start: start + size], slot.alloc.view[:size])

        for start in range(0, n, chunk):
            size = min(chunk, n - start)
            if len(pending) == len(self.slots):
                finish()
            slot = self.take()
            key = (1, src.id, start, size)
            if slot.recorded != key:
                self.core.record_copy(slot.cmd, src.buffer, start, slot.alloc.buffer, 0, size)
                slot.recorded = key
            slot.serial = self.core.timeline.submit(slot.submit)
            self.core.stats["staged_copies"] += 1
            pending.append((slot, start, size, slot.serial))
        while pending:
            finish()

    def destroy(self) -> None:
        for slot in self.slots:
            self.core.destroy_allocation(slot.alloc)
        self.slots = []

