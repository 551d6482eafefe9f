"""The execution model of a ComputeDevice: queues, fences, command batches, timings and external handles.

These are the kit's handles; `ExecutionModel` (`model`) makes them and runs every
check, and a backend supplies vendor calls (see `base`'s docstring).

* `Queue`: an in-order queue.  `device.queue` is the default one, which
  `device.dispatch` and the host-side calls use; `device.create_queue()`
  makes more where the hardware has them.  Between queues only fences order
  work.
* `Fence`: a timeline, a 64-bit counter that only increases.  A queue signals
  a value after its earlier work, another queue waits for a value on the
  device, the host waits with a timeout or polls `value`.  Every backend
  follows the same rules: each signal exceeds the last, and a wait for a value
  that no submitted signal reaches is refused (InvalidState) instead of
  hanging.  Where the vendor API has no fences of its own (one queue:
  WebGPU, OpenGL), `EmulatedFence` keeps, per signalled value, the serial of
  the queue's submission it follows: waiting for the value is waiting for
  that serial, and a queue wait on the one queue is already ordered.
* `CommandBatch` and `Command`: dispatches, copies, fills, writes and reads
  recorded once and submitted many times, each command in order after the
  previous one's writes; `Command.update` re-binds buffers, params or data
  between submits.
* `Timings`: device time of a submitted batch, per command, in nanoseconds.
* `ExternalMemory` and `ExternalFence`: an exported fd with what it holds,
  owned until closed, for zero-copy hand-over between backends on one GPU.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ClosedError, InvalidArgument
from ..types import DType

if TYPE_CHECKING:
    from .handles import BufferHandle, PipelineHandle, Submission
    from .model import ExecutionModel

__all__ = ["FEATURES", "MEMORY_KINDS", "Queue", "Fence", "EmulatedFence", "CommandBatch", "Command", "Timings",
           "ExternalMemory", "ExternalFence", "close_duplicate", "constants_key", "fence_value"]

#: What a ComputeDevice may declare in `execution_features` (contract 1.2); `device.features` lists them.
FEATURES = ("queues", "fences", "batches", "timestamps", "typed_params", "constants", "map", "dlpack",
            "export_memory", "import_memory", "export_fence", "import_fence")

#: Memory a buffer may live in: "device" (fastest for the device; the default), "host" (host-visible and
#: bindable in dispatches), "upload" and "readback" (host-visible staging; copies only where the API says so).
MEMORY_KINDS = ("device", "host", "upload", "readback")

_U64 = (1 << 64) - 1


def fence_value(backend: str, value: Any, op: str) -> int:
    """A fence value: an int in 0..2**64-1 (numpy integers too; bools and floats refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= int(value) <= _U64:
        raise InvalidArgument(backend, op, detail=f"a fence value is an int in 0..2**64-1, got {value!r}")
    return int(value)


def constants_key(backend: str, constants: Any, op: str = "pipeline") -> tuple[tuple[str | int, Any], ...]:
    """`constants` checked and sorted into a hashable key: names (identifiers) or ids (ints >= 0) to bool, int or
    float values (numpy scalars become Python ones)."""
    if constants is None:
        return ()
    if not isinstance(constants, Mapping):
        raise InvalidArgument(backend, op, detail=f"constants must be a dict of name -> value, got "
                              f"{type(constants).__name__}")
    items: list[tuple[str | int, Any]] = []
    for name, value in constants.items():
        if isinstance(name, str):
            if not name.isidentifier() or not name.isascii():
                raise InvalidArgument(backend, op, detail=f"constant name {name!r} is not an identifier")
        elif isinstance(name, bool) or not isinstance(name, int) or name < 0:
            raise InvalidArgument(backend, op, detail=f"a constant is named by a str (or an id, an int >= 0), "
                                  f"got {name!r}")
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, (bool, int, float)):
            raise InvalidArgument(backend, op, detail=f"constant {name!r} must be a bool, int or float, got "
                                  f"{type(value).__name__}")
        if isinstance(value, float) and value != value:
            raise InvalidArgument(backend, op, detail=f"constant {name!r} is NaN")
        items.append((name, value))
    return tuple(sorted(items, key=lambda item: (isinstance(item[0], int), str(item[0]))))


class Queue:
    """An in-order queue of a ComputeDevice: `dispatch`, `submit` a batch, `signal`/`wait` fences, `synchronize`.

    `index` is 0 for the device's default queue; `priority` the priority the backend gave it (higher runs first
    where the hardware can choose).
    """

    __slots__ = ("_device", "_vq", "index", "priority", "_closed", "_last_batch_serial", "__weakref__")

    def __init__(self, device: ExecutionModel, vq: Any, index: int, priority: int):
        self._device = device
        self._vq = vq
        self.index = index
        self.priority = priority
        self._closed = False

    @property
    def device(self) -> ExecutionModel:
        """The device the queue submits to."""
        return self._device

    @property
    def closed(self) -> bool:
        """Whether the queue, or its device, is closed."""
        return self._closed or self._device._closed

    def dispatch(self, pipeline: PipelineHandle, buffers: Any, groups: Any, params: Any = ()) -> Submission:
        """Queue `pipeline` over `groups` workgroups on this queue; returns at once."""
        return self._device._dispatch_on(self, pipeline, buffers, groups, params)

    def submit(self, batch: CommandBatch, *, wait: Iterable[tuple[Fence, int]] = (),
               signal: Iterable[tuple[Fence, int]] = ()) -> Submission:
        """Submit a recorded batch, after the device waits for each `(fence, value)` in `wait`; each fence in
        `signal` is signalled to its value once the batch has finished."""
        return self._device._submit_on(self, batch, wait, signal)

    def signal(self, fence: Fence, value: int) -> None:
        """Signal `fence` to `value` once the work submitted to this queue so far has finished."""
        self._device._signal_on(self, fence, value)

    def wait(self, fence: Fence, value: int) -> None:
        """Make work submitted to this queue from now on wait, on the device, until `fence` reaches `value`."""
        self._device._wait_fence_on(self, fence, value)

    def synchronize(self) -> None:
        """Wait on the host for everything submitted to this queue."""
        self._device._synchronize_queue(self)

    def close(self) -> None:
        """Wait for this queue's work and release it; twice is a no-op, and the default queue stays open."""
        if self.index and not self._closed:
            self._device._close_queue(self)

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return f"<Queue {self.index} of {self._device.descriptor.name} priority={self.priority}{state}>"


class Fence:
    """A timeline of one device: `value` (polls), `wait(value, timeout)` on the host, `close()`."""

    __slots__ = ("_device", "_vf", "_signalled", "exportable", "__weakref__")

    def __init__(self, device: ExecutionModel, vf: Any, value: int, exportable: bool):
        self._device = device
        self._vf = vf
        #: The highest value a submitted signal (or the initial value) reaches: waits beyond it are refused.
        self._signalled = value
        self.exportable = exportable

    @property
    def device(self) -> ExecutionModel:
        """The device the fence belongs to."""
        return self._device

    @property
    def closed(self) -> bool:
        """Whether the fence, or its device, is closed."""
        return self._vf is None or self._device._closed

    @property
    def value(self) -> int:
        """The value the fence has reached (a poll: the work may have gone further since)."""
        return self._device._fence_value_of(self)

    def wait(self, value: int, timeout: float | None = None) -> None:
        """Block until the fence reaches `value`; `Timeout` when `timeout` seconds pass first."""
        self._device._fence_wait_for(self, value, timeout)

    def close(self) -> None:
        """Release the fence once the work that signals or waits for it has finished; twice is a no-op."""
        vf, self._vf = self._vf, None
        if vf is not None:
            self._device._release_fence(vf)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<Fence {'closed' if self.closed else f'signalled up to {self._signalled}'}>"


class EmulatedFence:
    """A fence over one queue's serials, for backends without fences of their own (WebGPU, OpenGL).

    `points` pairs each signalled value with the serial of the queue's last submission when it was signalled;
    the value is reached once that serial has finished.
    """

    __slots__ = ("points", "reached", "lock")

    def __init__(self, value: int):
        self.points: list[tuple[int, int]] = []
        self.reached = value
        self.lock = threading.Lock()

    def serial_for(self, value: int) -> int | None:
        """The serial after which `value` is reached, 0 if it already is, None if nothing signals it."""
        if value <= self.reached:
            return 0
        for point, serial in self.points:
            if point >= value:
                return serial
        return None

    def settle(self, completed: int) -> int:
        """Record every point whose serial has finished; returns the value reached."""
        with self.lock:
            while self.points and self.points[0][1] <= completed:
                self.reached = max(self.reached, self.points.pop(0)[0])
        return self.reached


@dataclass(frozen=True)
class Timings:
    """Device time of a submitted batch: `spans` (start_ns, end_ns) per command from the batch's first start,
    `commands_ns` their lengths and `total_ns` from the first start to the last end."""

    spans: tuple[tuple[int, int], ...]

    @property
    def commands_ns(self) -> tuple[int, ...]:
        """Each timed command's duration in nanoseconds, in submission order."""
        return tuple(end - start for start, end in self.spans)

    @property
    def total_ns(self) -> int:
        """Nanoseconds from the batch's start to its last command's end."""
        return max((end for _, end in self.spans), default=0)

    @classmethod
    def of(cls, raw: Iterable[tuple[float, float]]) -> Timings:
        """From (start, end) pairs on the device's clock in ns, shifted so the batch starts at 0."""
        pairs = [(float(s), float(e)) for s, e in raw]
        if not pairs:
            return cls(())
        origin = min(s for s, _ in pairs)
        return cls(tuple((round(s - origin), round(e - origin)) for s, e in pairs))


class Command:
    """One recorded command of a CommandBatch: `kind` ("dispatch", "copy", "fill", "write" or "read"), its
    position `index`, and what it works on.  The backend reads the checked fields:

    dispatch: program, handles (vendor buffers), dims, params (packed), buffers (the handles' owners)
    copy:     src, dst (vendor buffers), src_offset, dst_offset, nbytes
    fill:     dst, offset, nbytes, word (the 32-bit pattern as an int)
    write:    dst, offset, data (uint8 array, the batch's own copy)
    read:     src, offset, out (the caller's array, as flat uint8)
    """

    __slots__ = ("_batch", "index", "kind", "program", "handles", "dims", "params", "buffers", "src", "dst",
                 "src_offset", "dst_offset", "offset", "nbytes", "word", "data", "out", "_owners", "pipeline",
                 "_given")

    def __init__(self, batch: CommandBatch, index: int, kind: str):
        self._batch = batch
        self.index = index
        self.kind = kind
        self.program: Any = None
        self.pipeline: Any = None
        self.handles: list[Any] = []
        self.dims = (1, 1, 1)
        self.params: Any = b""
        self.buffers: tuple[Any, ...] = ()
        self.src: Any = None
        self.dst: Any = None
        self.src_offset = self.dst_offset = self.offset = self.nbytes = self.word = 0
        self.data: np.ndarray | None = None
        self.out: np.ndarray | None = None
        #: The BufferHandles this command uses (checked open at every submit).
        self._owners: tuple[Any, ...] = ()
        #: A dispatch's params as the caller gave them (Command.update re-packs them with new buffers/groups).
        self._given: Any = ()

    def update(self, **changes: Any) -> None:
        """Re-bind this command before the next submit: `buffers=`, `params=`, `groups=` (dispatch), `src=`,
        `dst=` (copy), `value=` (fill), `array=` (write), `out=` (read); checked like the original."""
        self._batch._device._update_command(self._batch, self, changes)

    def __repr__(self) -> str:
        return f"<Command {self.index} {self.kind}>"


class CommandBatch:
    """Commands recorded once and submitted many times (`queue.submit(batch)`), in order.

    `timestamps=True` records the device time of each command: `submission.timings()`.
    """

    __slots__ = ("_device", "commands", "timestamps", "_recording", "_dirty", "_closed", "_last", "_reads",
                 "__weakref__")

    def __init__(self, device: ExecutionModel, timestamps: bool):
        self._device = device
        self.commands: list[Command] = []
        self.timestamps = timestamps
        self._recording: Any = None
        self._dirty = True
        self._closed = False
        #: The last submission of this batch: (queue, serial), or None.
        self._last: tuple[Queue, int] | None = None
        self._reads = False

    @property
    def device(self) -> ExecutionModel:
        """The device the batch records for."""
        return self._device

    @property
    def closed(self) -> bool:
        """Whether the batch, or its device, is closed (then recording or submitting it raises ClosedError)."""
        return self._closed or self._device._closed

    def dispatch(self, pipeline: PipelineHandle, buffers: Any, groups: Any, params: Any = ()) -> Command:
        """Record a dispatch (checked now, as `device.dispatch` checks it)."""
        return self._device._batch_dispatch(self, pipeline, buffers, groups, params)

    def copy(self, src: BufferHandle, dst: BufferHandle, nbytes: int | None = None, *, src_offset: int = 0,
             dst_offset: int = 0) -> Command:
        """Record a copy of `nbytes` bytes (default: all of `src` that fits) from `src` to `dst`."""
        return self._device._batch_copy(self, src, dst, nbytes, src_offset, dst_offset)

    def fill(self, buffer: BufferHandle, value: Any, *, offset: int = 0, nbytes: int | None = None) -> Command:
        """Record filling `nbytes` bytes from `offset` (multiples of 4) with the bytes of `value`, a scalar of the
        buffer's element type (of 4 bytes, or whose bytes repeat to 4: 0 for any type)."""
        return self._device._batch_fill(self, buffer, value, offset, nbytes)

    def write(self, buffer: BufferHandle, array: Any, *, offset: int = 0) -> Command:
        """Record writing a copy of `array`'s bytes (taken now) at byte `offset` of `buffer`, at every submit."""
        return self._device._batch_write(self, buffer, array, offset)

    def read(self, buffer: BufferHandle, out: np.ndarray, *, offset: int = 0) -> Command:
        """Record reading `out.nbytes` bytes from byte `offset` of `buffer` into `out`, which holds them once the
        submission has finished (`wait()` returned or `done()` is True)."""
        return self._device._batch_read(self, buffer, out, offset)

    def close(self) -> None:
        """Release the recording once its submissions have finished; twice is a no-op."""
        if not self._closed:
            self._closed = True
            self._device._release_batch(self)

    def __len__(self) -> int:
        return len(self.commands)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<CommandBatch {len(self.commands)} commands{' timestamps' if self.timestamps else ''}{state}>"


def close_duplicate(mine: int, fd: int) -> None:
    """Close `mine`, the duplicate of `fd` a failed import was given, unless the driver already closed it.

    Drivers differ on who owns the fd of a refused import (the specs say the caller; NVIDIA's driver 580 closes
    it in CUDA and Vulkan): `mine` is closed only while it still names `fd`'s file, so a number the driver
    released, and perhaps reused for a file of its own, is left alone.
    """
    try:
        a, b = os.fstat(mine), os.fstat(fd)
    except OSError:
        return
    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
        with contextlib.suppress(OSError):
            os.close(mine)


class _OwnedFd:
    """An fd owned by this object until `close()` (or `take()`); a closed one is -1."""

    fd: int

    def fileno(self) -> int:
        if self.fd < 0:
            raise ClosedError("compute", "fileno", type(self).__name__)
        return self.fd

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def dup(self, backend: str, op: str) -> int:
        """A duplicate of the fd for a vendor call that takes ownership; InvalidArgument if it is closed."""
        if self.fd < 0:
            raise ClosedError(backend, op, type(self).__name__)
        try:
            os.fstat(self.fd)
            return os.dup(self.fd)
        except OSError as exc:
            raise InvalidArgument(backend, op, detail=f"the fd {self.fd} is not open: {exc.strerror}") from None

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class ExternalMemory(_OwnedFd):
    """Device memory exported as an fd (`handle_type` "opaque_fd"): `size` bytes; owns the fd until closed.

    Import it with `other_device.import_memory(ext, size, dtype)` (the importer takes a duplicate, so the same
    export may be imported more than once and must still be closed).
    """

    def __init__(self, fd: int, size: int, handle_type: str = "opaque_fd", backend: str = "",
                 dedicated: bool = True):
        self.fd = fd
        self.size = size
        self.handle_type = handle_type
        self.backend = backend
        #: Whether the exporter made a dedicated allocation (Vulkan's import must then ask for one too).
        self.dedicated = dedicated

    def __repr__(self) -> str:
        return f"<ExternalMemory {self.handle_type} fd={self.fd} {self.size} bytes from {self.backend or '?'}>"


class ExternalFence(_OwnedFd):
    """A timeline fence exported as an fd (`handle_type` "opaque_fd"); owns the fd until closed."""

    def __init__(self, fd: int, handle_type: str = "opaque_fd", backend: str = ""):
        self.fd = fd
        self.handle_type = handle_type
        self.backend = backend

    def __repr__(self) -> str:
        return f"<ExternalFence {self.handle_type} fd={self.fd} from {self.backend or '?'}>"


def dtype_bytes(value: Any, dtype: DType, backend: str, op: str) -> bytes:
    """The bytes of one scalar `value` as `dtype` (for fills)."""
    try:
        return np.asarray(value, dtype=dtype.numpy).reshape(()).tobytes()
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidArgument(backend, op, detail=f"{value!r} is not a {dtype.value}: {exc}") from None
