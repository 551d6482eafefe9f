"""The handles a ComputeDevice gives out, their lifetimes, the program cache, and waiting.

* `BufferHandle`: `dtype`, `size`, `nbytes` and the vendor object in `handle`
  (None once closed).  `close()` is idempotent and hands the vendor object to
  its device once; a handle that is garbage-collected unclosed is queued on its
  device and freed at that device's next call, never from inside the garbage
  collector (which may run in the middle of another call of that device).
* `Program` and `PipelineHandle`: a compile result shared by every handle that
  asked for the same code and interface; `ProgramCache` keeps them, least
  recently used first, and releases only programs no open handle uses.
* `SpareBuffers`: closed small vendor buffers kept by size for the next buffer of that size (a backend's
  `_recycle` and `_create_buffer`), so a round trip of small buffers makes and frees no vendor object.
* `Submission` and `wait_for`: one meaning of a timeout for every wait.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ClosedError, InvalidState, Timeout
from ..types import DType
from .checks import timeout_seconds
from .params import ParamBlock
from .shaders import Interface

if TYPE_CHECKING:
    from .base import ComputeDeviceBase
    from .execution import CommandBatch, Queue, Timings
    from .model import ExecutionModel

__all__ = ["BufferHandle", "Program", "PipelineHandle", "ProgramCache", "SpareBuffers", "Submission", "wait_for",
           "evict_unused", "SPARE_BUFFERS", "SPARE_MAX_BYTES", "WAIT_SLICE"]

#: The longest single wait handed to a backend: longer bounded waits are made of slices, so no timeout
#: overflows a driver's integer (vkWaitForFences' nanoseconds, threading.Event's C time).
WAIT_SLICE = 1.0


def wait_for(backend: str, op: str, block: Callable[[float | None], bool], timeout: Any,
             what: str = "the work") -> None:
    """Wait with `block(seconds)` (True once done; `None` waits until done) for at most `timeout` seconds.

    `timeout` None (or inf) waits until done, 0 polls once, a positive number
    bounds the wait (any size: 1e11 is a legal wait); NaN, negatives and
    non-numbers are InvalidArgument.  Past the deadline: `Timeout`.
    """
    seconds = timeout_seconds(backend, timeout, op)
    if seconds is None:
        block(None)
        return
    deadline = time.monotonic() + seconds
    while not block(min(seconds, WAIT_SLICE)):
        seconds = deadline - time.monotonic()
        if seconds <= 0:
            raise Timeout(backend, op, float(timeout), what)


#: Bytes per element by the DType's id: a DType is an Enum, whose hash is a Python-level call (DType.itemsize
#: looks it up by that hash), and a buffer is made on every upload and alloc.
_ITEMSIZE: dict[int, int] = {id(d): d.itemsize for d in DType}


class BufferHandle:
    """Device memory of one ComputeDevice: 1-D, `size` elements of `dtype`, `nbytes` bytes.

    `memory` is the kind it was allocated in ("device" unless `alloc(memory=)` said otherwise); `host_visible`
    says whether `map()` works on it.  `np.asarray(buffer)` and DLPack (`np.from_dlpack(buffer)`) give a view
    without a copy where the memory stays mapped for the buffer's life; elsewhere they raise InvalidState
    naming what to call (`device.download(buffer)`).
    """

    __slots__ = ("dtype", "size", "nbytes", "handle", "memory", "exportable", "_device", "__weakref__")

    def __init__(self, device: ComputeDeviceBase, handle: Any, dtype: DType, size: int):
        self._device = device
        self.handle: Any = handle  # the vendor object; None once closed
        self.dtype = dtype
        self.size = size
        self.nbytes = size * _ITEMSIZE[id(dtype)]
        self.memory = "device"
        self.exportable = False

    @property
    def device(self) -> ComputeDeviceBase:
        """The device that owns this buffer (a buffer is only used on its own device)."""
        return self._device

    @property
    def host_visible(self) -> bool:
        """True where `map()` works on this buffer (host-visible memory of a backend that maps)."""
        return "map" in self._device._features and self._device._access(self)[0]

    @contextmanager
    def map(self, write: bool = True) -> Iterator[np.ndarray]:
        """`with buffer.map() as a:` a 1-D array of the buffer's elements, ordered after earlier work on the
        device's default queue; the device does not use the buffer until the block ends.  `write=False` maps for
        reading only (a backend that maps by copy then writes nothing back)."""
        array, persistent = self._device._map_buffer(self, bool(write))
        try:
            yield array
        finally:
            self._device._unmap_buffer(self, None if persistent else array, bool(write))

    def _persistent_view(self, op: str) -> np.ndarray:
        device = self._device
        if "map" in device._features and device._access(self) == (True, True):
            return device._map_buffer(self, True, op)[0]
        raise InvalidState(device.backend, op, detail=f"this buffer's memory ({self.memory}) is not mapped for the "
                           "buffer's life, so no view without a copy exists; device.download(buffer) copies it to "
                           "the host" + (" and buffer.map() maps it for a block" if self.host_visible else ""))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if copy:
            array = self._device.download(self)
        else:
            array = self._persistent_view("__array__")
        return array if dtype is None else array.astype(dtype, copy=False)

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._persistent_view("__dlpack__").__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        self._persistent_view("__dlpack_device__")
        return (1, 0)  # kDLCPU: host memory the device also reaches

    @property
    def closed(self) -> bool:
        """True once this buffer or its device is closed."""
        return self.handle is None or self._device._closed

    def close(self) -> None:
        """Free the memory once the work that uses it has finished; twice (or after the device closed) is a no-op."""
        handle, self.handle = self.handle, None
        if handle is not None:
            self._device._release_buffer(handle)

    def __del__(self) -> None:
        handle = getattr(self, "handle", None)
        if handle is not None:
            try:
                self._device._collect(handle)
            except Exception:  # at interpreter exit the device may be half torn down
                pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.nbytes} bytes"
        return f"<{type(self).__name__} {self.dtype.value}[{self.size}] {state}>"


class Program:
    """What one compile produced; `users` counts the open handles on it, `release()` frees it (once)."""

    def __init__(self, buffers: int, params: int, interface: Interface | None = None):
        self.buffers = buffers
        self.params = params
        self.interface = interface or Interface.unknown(buffers)
        self.users = 0
        self.released = False
        #: The reflected params block dispatches pack by (set by the kit when the pipeline is made), or None.
        self.block: ParamBlock | None = None
        #: (buffer ids, device epoch, vendor handles) of the last dispatch, whose checks passed (the kit's).
        self.last_binding: tuple[tuple[int, ...], int, list[Any]] | None = None
        #: The workgroup size it was compiled for (set by the kit; a launch that must pass it reads it here).
        self.workgroup_size: tuple[int, int, int] = (1, 1, 1)

    def release(self) -> None:
        """Free the vendor objects (after the work that used them, where the driver does not defer it itself)."""
        self.released = True


class PipelineHandle:
    """A handle on a cached Program: `entry`, `buffers`, `params`, `workgroup_size`.

    Closing it (or dropping it) leaves the program cached for the next identical request.
    """

    __slots__ = ("entry", "buffers", "params", "workgroup_size", "program", "_device", "__weakref__")

    def __init__(self, device: Any, program: Program, entry: str, workgroup_size: tuple[int, int, int]):
        self._device = device
        self.program: Program | None = program
        self.entry = entry
        self.buffers = program.buffers
        self.params = program.params
        self.workgroup_size = workgroup_size
        program.users += 1

    @property
    def device(self) -> Any:
        """The device the pipeline was made on."""
        return self._device

    @property
    def interface(self) -> Interface:
        """What the code declares: its storage buffers (`bindings`), parameter block (`params`) and
        specialization constants (`constants`); see `ironaccel.compute.Interface`."""
        program = self.program
        if program is None:
            raise ClosedError(getattr(self._device, "backend", "compute"), "interface", "pipeline")
        return program.interface

    @property
    def closed(self) -> bool:
        """Whether the pipeline, or its device, is closed."""
        return self.program is None or self._device.closed

    def close(self) -> None:
        """Release this handle; a second call is a no-op."""
        program, self.program = self.program, None
        if program is not None:
            program.users -= 1

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self.program is None else f"buffers={self.buffers} params={self.params}"
        return f"<{type(self).__name__} {self.entry!r} {state}>"


def evict_unused(programs: MutableMapping[Any, Any], limit: int) -> None:
    """Shrink a least-recently-used program cache to `limit` by releasing programs no pipeline uses.

    The cache maps keys to objects with `users` (live pipelines) and `release()`;
    programs in use stay, so the cache may stay over the limit until they close.
    """
    if len(programs) <= limit:
        return
    for key, program in list(programs.items()):
        if program.users == 0:
            del programs[key]
            program.release()
            if len(programs) <= limit:
                return


class ProgramCache:
    """Programs of one device by key, least recently used first, at most `limit` unused ones kept."""

    def __init__(self, limit: int):
        self.limit = limit
        self._programs: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable) -> Any:
        """The program kept under `key`, or None when there is none or it was released."""
        program = self._programs.get(key)
        if program is not None:
            if program.released:
                del self._programs[key]
                return None
            self._programs.move_to_end(key)
        return program

    def add(self, key: Hashable, program: Any) -> None:
        """Keep `program` under `key`, evicting the least recently used unused programs past the limit."""
        self._programs[key] = program
        evict_unused(self._programs, self.limit)

    def clear(self) -> None:
        """Release every program (the device is closing)."""
        programs = list(self._programs.values())
        self._programs.clear()
        for program in programs:
            if not program.released:
                program.release()

    def __len__(self) -> int:
        return len(self._programs)

    def __contains__(self, program: object) -> bool:
        return any(p is program for p in self._programs.values())


#: A closed buffer of at most SPARE_MAX_BYTES is kept, up to SPARE_BUFFERS of them, for the next buffer of the
#: same size (OpenGL: glBufferSubData into it instead of glGenBuffers + glBufferData and glDeleteBuffers, and it
#: keeps its binding; WebGPU: a queue write instead of a buffer made, destroyed and polled for, with its bind
#: groups kept).
SPARE_MAX_BYTES = 64 << 10
SPARE_BUFFERS = 16


class SpareBuffers:
    """Closed vendor buffers by byte size, oldest first: `keep` one (False when it is too large or the pool
    full: free it), `take` one of a size (None when there is none), `clear` them all (the device is closing and
    frees them with itself)."""

    __slots__ = ("max_bytes", "limit", "_by_size", "_count")

    def __init__(self, max_bytes: int = SPARE_MAX_BYTES, limit: int = SPARE_BUFFERS):
        self.max_bytes = max_bytes
        self.limit = limit
        self._by_size: dict[int, deque[Any]] = {}
        self._count = 0

    def take(self, nbytes: int) -> Any:
        # The oldest first, so buffers made and closed in turn keep their bindings and bind groups.
        spare = self._by_size.get(nbytes) if nbytes <= self.max_bytes else None
        if not spare:
            return None
        handle = spare.popleft()
        self._count -= 1
        if not spare:
            del self._by_size[nbytes]
        return handle

    def keep(self, handle: Any, nbytes: int) -> bool:
        if nbytes > self.max_bytes or self._count >= self.limit:
            return False
        spare = self._by_size.get(nbytes)
        if spare is None:
            spare = self._by_size[nbytes] = deque()
        spare.append(handle)
        self._count += 1
        return True

    def clear(self) -> None:
        self._by_size.clear()
        self._count = 0


class Submission:
    """Work handed to a device: `wait(timeout)` blocks until it and everything before it has finished.

    `wait()` raises `ironaccel.errors.Timeout` when the timeout passes first
    (see `wait_for`); `done()` polls.  After `ComputeDeviceBase.close()` both
    say the work is finished: closing waited for it.
    """

    __slots__ = ("_device", "serial", "_queue", "_batch", "_timings")

    def __init__(self, device: ExecutionModel, serial: int, queue: Queue | None = None,
                 batch: CommandBatch | None = None):
        self._device = device
        self.serial = serial
        self._queue = queue
        self._batch = batch
        self._timings: Timings | None = None

    @property
    def queue(self) -> Queue:
        """The queue this work went to."""
        return self._queue or self._device._queue

    def wait(self, timeout: float | None = None) -> None:
        """Block until the submitted work has finished; errors.Timeout after `timeout` seconds (None: no limit)."""
        queue = self._queue
        if queue is None or queue.index == 0:
            self._device._wait_serial(self.serial, timeout)
        else:
            self._device._wait_queue_serial(queue, self.serial, timeout)
        if self._batch is not None:
            self._device._settle()

    def done(self) -> bool:
        """Whether the submitted work has finished, without waiting (a poll)."""
        queue = self._queue
        if queue is None or queue.index == 0:
            finished = self._device._serial_done(self.serial)
        else:
            finished = self._device._queue_serial_done(queue, self.serial)
        if finished and self._batch is not None:
            self._device._settle()
        return finished

    def timings(self, timeout: float | None = None) -> Timings:
        """The device time of each command of a batch recorded with `timestamps=True`; waits for it first."""
        return self._device._submission_timings(self, timeout)

    def __repr__(self) -> str:
        state = " done" if self.serial <= self._device._completed else ""
        return f"<{type(self).__name__} {self.serial}{state}>"
