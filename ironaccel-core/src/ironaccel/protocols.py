"""What backends implement, as typing Protocols.

Two layers:

* `Backend` -- identity, probe, enumerate, open.  Every backend has it.
* The device surface: `Device`, `Stream`, `Event`, `Buffer` for backends with
  explicit streams and memory (CUDA, HIP, Level Zero), and `ComputeDevice`,
  the small cross-vendor surface (upload, download, pipeline, dispatch) that
  CUDA, Vulkan, WebGPU and OpenGL all implement, so one routine runs on any.

Protocols are structural: a third-party backend needs no base class, only the
methods.  `ironaccel.testing.conformance` checks behaviour, not just shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from .types import DeviceDescriptor, DType, ProbeResult

__all__ = [
    "Backend",
    "Device",
    "Stream",
    "Event",
    "Buffer",
    "ComputeDevice",
    "ComputeBuffer",
    "Pipeline",
    "Submission",
    "ComputeQueue",
    "ComputeFence",
    "ComputeBatch",
]


@runtime_checkable
class Backend(Protocol):
    """One backend: cheap to construct; touches hardware only in its methods.

    `probe()` must never raise for an unusable backend: it returns a
    `ProbeResult` with `available=False` and the reason.  `devices()` and
    `open()` raise `NotAvailable` (with that reason) when the probe failed.
    The registry caches the probe's result; a backend that keeps state of its
    own (loaded libraries, enumerated devices) may also have ``refresh()``,
    which the registry calls from its own ``refresh()`` so that the next
    probe starts afresh.  `ironaccel.probing.ProbedBackend` provides all of it.
    """

    name: str

    def probe(self) -> ProbeResult:
        """Whether the backend can run here and why not; loads the vendor library, never raises."""

    def devices(self) -> Sequence[DeviceDescriptor]:
        """The backend's devices as descriptors, ordinals 0..n-1; NotAvailable when the probe failed."""

    def open(self, ordinal: int = 0) -> Any:
        """Open device `ordinal`; InvalidArgument for an ordinal out of range, NotAvailable when unusable."""


@runtime_checkable
class Event(Protocol):
    """A marker in a stream: record, wait for it, time between two."""

    def record(self, stream: Stream | None = None) -> None:
        """Record the event on `stream` (the default stream when None)."""

    def synchronize(self) -> None:
        """Block until the work before the event's last record has finished."""

    def query(self) -> bool:
        """True when all work before the record has completed."""
        ...

    def elapsed_ms(self, start: Event) -> float:
        """Milliseconds from `start` to this event (both recorded, timing on)."""
        ...

    def close(self) -> None:
        """Release the event; a second close does nothing."""


@runtime_checkable
class Stream(Protocol):
    """An in-order queue of device work."""

    def synchronize(self) -> None:
        """Block until all work queued on this stream has finished."""

    def query(self) -> bool:
        """True when all submitted work has completed."""
        ...

    def wait(self, event: Event) -> None:
        """Make later work on this stream wait for `event`."""
        ...

    def record(self, event: Event | None = None) -> Event:
        """Record `event` (a new one when None) on this stream and return it."""

    def close(self) -> None:
        """Release the stream after its work finishes; a second close does nothing."""


@runtime_checkable
class Buffer(Protocol):
    """Typed device memory: `dtype`, `size` elements, `nbytes` bytes."""

    dtype: DType
    size: int
    nbytes: int

    def copy_from(self, src: Any, stream: Stream | None = None) -> None:
        """Copy a host array (or another buffer) into this one."""
        ...

    def copy_to_host(self, out: Any = None, stream: Stream | None = None) -> Any:
        """Copy to a new numpy array, or into `out`; returns the array."""
        ...

    def close(self) -> None:
        """Free the buffer's memory; a second close does nothing."""


@runtime_checkable
class Device(Protocol):
    """An opened device with explicit streams, events and memory."""

    descriptor: DeviceDescriptor

    def synchronize(self) -> None:
        """Block until all work on every stream of the device has finished."""

    def create_stream(self) -> Stream:
        """A new stream of this device."""

    def create_event(self, timing: bool = False) -> Event:
        """A new event; `timing=True` makes it usable for elapsed-time measurement."""

    def alloc(self, size: int, dtype: Any = "uint8", stream: Stream | None = None) -> Buffer:
        """Allocate `size` elements of `dtype`, ordered on `stream` when given."""

    def close(self) -> None:
        """Release the device and what was made on it; later calls raise ClosedError."""


@runtime_checkable
class ComputeBuffer(Protocol):
    """Memory owned by the ComputeDevice that made it: 1-D, `size` elements of `dtype`, `nbytes` bytes.

    `close()` frees it once the work already submitted that uses it has
    finished; closing twice, or after the device closed, is a no-op.  A buffer
    dropped without `close()` is freed at its device's next call.  `closed` is
    True once the buffer or its device is closed.
    """

    dtype: DType
    size: int
    nbytes: int

    def close(self) -> None:
        """Free the buffer's memory once work queued on it has finished; a second close does nothing."""


@runtime_checkable
class Pipeline(Protocol):
    """A handle on compiled code: `entry`, `buffers` storage bindings, `params` scalars.

    Handles on the same (code, entry, buffers, params) share one compiled
    program; `close()` releases the handle (twice is a no-op) and leaves the
    program cached for the next identical request.
    """

    entry: str
    buffers: int

    def close(self) -> None:
        """Release the compiled pipeline; a second close does nothing."""


@runtime_checkable
class Submission(Protocol):
    """Work handed to the device.

    `wait(timeout=None)` blocks until this work and everything submitted
    before it has finished.  `timeout` is in seconds: None (or inf) waits
    until done; 0 polls once; any positive number bounds the wait, however
    large (1e11 is a legal wait, never an overflow); NaN, a negative number or
    a non-number is `InvalidArgument`.  When the time passes first, `wait`
    raises `ironaccel.errors.Timeout` (an `IronAccelError` and a built-in
    `TimeoutError`) and the work goes on.  `done()` polls and never raises for
    time.  Closing the device never makes a submission fail: `wait` still
    returns once the work is done (at once where closing waited for it).
    """

    def wait(self, timeout: float | None = None) -> None:
        """Block until the submitted work finishes; errors.Timeout after `timeout` seconds (None: no limit)."""

    def done(self) -> bool:
        """Whether the submitted work has finished, without waiting."""


@runtime_checkable
class ComputeQueue(Protocol):
    """An in-order queue of a ComputeDevice (contract 1.2; `ironaccel.compute.Queue`).

    Work on one queue runs in submission order; between queues only fences order it.  `signal(fence, v)`
    raises the fence to `v` once the queue's earlier work has finished; `wait(fence, v)` makes the queue's later
    work wait on the device.  Host-side calls of the device are ordered on its default queue (`device.queue`).
    """

    index: int
    priority: int

    def dispatch(self, pipeline: Pipeline, buffers: Sequence[ComputeBuffer], groups: int | tuple[int, ...],
                 params: Any = ()) -> Submission:
        """Queue one dispatch on this queue and return its Submission."""

    def submit(self, batch: ComputeBatch, *, wait: Any = (), signal: Any = ()) -> Submission:
        """Submit a recorded batch, after the (fence, value) pairs in `wait`, signalling those in `signal`."""

    def signal(self, fence: ComputeFence, value: int) -> None:
        """Queue a signal setting `fence` to `value` once the work before it finishes."""

    def wait(self, fence: ComputeFence, value: int) -> None:
        """Make the queue's later work wait until `fence` reaches `value` (on the device, not the host)."""

    def synchronize(self) -> None:
        """Block until all work queued on this queue has finished."""

    def close(self) -> None:
        """Wait for this queue's work and release it; twice is a no-op, and the default queue stays open."""


@runtime_checkable
class ComputeFence(Protocol):
    """A timeline: a 64-bit counter that only increases (`ironaccel.compute.Fence`).

    Each signal must exceed every earlier one (InvalidArgument); a wait -- a queue's, or the host's without a
    timeout -- for a value no submitted signal reaches is InvalidState, never a hang.  `value` polls.
    """

    @property
    def value(self) -> int:
        """The value the fence has reached (a poll: the work may have gone further since)."""

    def wait(self, value: int, timeout: float | None = None) -> None:
        """Block the host until the fence reaches `value`; errors.Timeout after `timeout` seconds."""

    def close(self) -> None:
        """Release the fence once the work that signals or waits for it has finished; twice is a no-op."""


@runtime_checkable
class ComputeBatch(Protocol):
    """Commands recorded once and submitted many times, in order (`ironaccel.compute.CommandBatch`).

    dispatch / copy / fill / write / read each return a Command whose `update(...)` re-binds it before the next
    submit; a read's `out` holds the bytes once the submission has finished.  Byte offsets and sizes are
    multiples of 4 (what every API copies).
    """

    def dispatch(self, pipeline: Pipeline, buffers: Sequence[ComputeBuffer], groups: int | tuple[int, ...],
                 params: Any = ()) -> Any:
        """Record a dispatch of `pipeline` over `buffers` with `groups` workgroups and `params`."""

    def copy(self, src: ComputeBuffer, dst: ComputeBuffer, nbytes: int | None = None, *, src_offset: int = 0,
             dst_offset: int = 0) -> Any:
        """Record a copy of `nbytes` bytes (default: all of `src` that fits) from `src` to `dst`."""

    def fill(self, buffer: ComputeBuffer, value: Any, *, offset: int = 0, nbytes: int | None = None) -> Any:
        """Record filling `nbytes` bytes (default: the rest) from byte `offset` with the bytes of `value`, a scalar of
        the buffer's element type."""

    def write(self, buffer: ComputeBuffer, array: Any, *, offset: int = 0) -> Any:
        """Record writing a copy of `array`'s bytes (taken now) at byte `offset` of `buffer`, at every submit."""

    def read(self, buffer: ComputeBuffer, out: Any, *, offset: int = 0) -> Any:
        """Record reading `out.nbytes` bytes from byte `offset` of `buffer` into `out`, filled once the submission
        has finished."""

    def close(self) -> None:
        """Release the recording once its submissions have finished; twice is a no-op."""


@runtime_checkable
class ComputeDevice(Protocol):
    """The cross-vendor compute surface, with one set of rules for every backend.

    Code is backend-native: CUDA C++ or PTX (cuda), SPIR-V words (vulkan),
    WGSL (webgpu), GLSL 430 (opengl).  Each kernel takes `buffers` storage
    buffers, bound in order (binding 0, 1, ... / the first kernel arguments)
    and an optional list of 32-bit scalar `params`, delivered as push
    constants (vulkan), a uniform buffer at binding `buffers` (webgpu), a
    std140 uniform block at binding 0 (opengl) or by-value kernel arguments
    after the buffers (cuda).  Each code declares its own workgroup size;
    `workgroup_size` tells backends whose code cannot declare it (CUDA's block).

    The rules, each checked by `ironaccel.testing.conformance` and written
    once in `ironaccel.compute.ComputeDeviceBase`:

    * Errors: every bad input is `InvalidArgument` naming the op, never a raw
      TypeError or vendor exception; use after `close()` is `ClosedError`; an
      object of another device is `InvalidArgument`.
    * Buffers are 1-D.  `upload` takes any C-contiguous, native-endian,
      non-object array of at least one element and flattens it in C order;
      `alloc(size, dtype)` takes an int size >= 1 whose bytes fit the device.
    * `write(buffer, array)` copies the array's raw bytes into the start of
      the buffer (at most `buffer.nbytes`), ordered after earlier work.
    * `download(buffer)` returns a new 1-D array of `size` elements of
      `dtype`.  `download(buffer, out)` takes any writeable C-contiguous
      non-object ndarray of at most `buffer.nbytes` bytes, of any dtype and
      shape, fills it with the buffer's first `out.nbytes` raw bytes (no
      conversion) and returns it.
    * `dispatch`: `buffers` is a list or tuple of exactly `pipeline.buffers`
      buffers of this device; `params` a list, tuple or 1-D array of exactly
      `pipeline.params` scalars: np.float32, np.int32, np.uint32, Python float
      (as float32) or int (int32, uint32 above the int32 range); anything else
      (None, a generator, a bare number, bool, float64, a value that does not
      fit 32 bits) is refused.  `groups` is an int or 1 to 3 ints, each in
      1..the device's limit.
    * Element types: where the shader's language declares a storage buffer's
      element type (WGSL `array<f32>`, GLSL `float x[]`, a SPIR-V runtime
      array), the bound buffer's dtype must be that type; to reinterpret
      memory, upload a view (`a.view(np.uint32)`).  CUDA modules do not carry
      their pointer types, so CUDA checks none.
    * One buffer in several bindings of one dispatch is allowed only where
      the shader declares every one of those bindings read-only (WGSL
      `read`, GLSL `readonly`, SPIR-V NonWritable); a binding whose access is
      not declared counts as writable.  WebGPU forbids writable aliasing, and
      elsewhere it would make results depend on the driver.
    * Pipelines: compiled once per (code, entry, buffers, params) per device;
      `buffers` and `params` are ints >= 0, `entry` a non-empty str;
      compilation failures are `CompileError` carrying the compiler's log.
      Text code is a str or UTF-8 bytes without NUL or lone surrogates.
    * Ordering: every call on one device is ordered after every earlier call
      on it, as on one in-order queue (`write` included).  `dispatch` returns
      at once with a `Submission`; `download` waits for the work before it;
      `synchronize` waits for everything.  Waiting follows `Submission`.
    * Lifetime: `close()` releases the device; twice is a no-op.  Every later
      call on it is `ClosedError`, and its buffers and pipelines cannot be
      used with it any more (Vulkan, WebGPU and OpenGL wait for the work and
      free them all; a CUDA DeviceBuf stays valid CUDA memory until closed).
    * Fork: a device opened before `os.fork()` raises `InvalidState` in the
      child from every call (its driver state did not come along), and
      `close()` there forgets it without a driver call.
    * Threads: calls from several threads are serialized per device, except
      where the vendor API ties a device to one thread (OpenGL's EGL
      context): there other threads get `InvalidState`.

    The execution model (contract 1.2, `ironaccel.compute.execution`; a backend declares what it has in
    `device.features`, and everything else raises `Unsupported` saying why): `device.queue` and
    `create_queue(priority)`; `create_fence(value, exportable=)`; `batch(timestamps=)` and `submit(batch,
    wait=, signal=)` with `Submission.timings()`; `pipeline(..., params="auto", constants={...})` and
    `pipeline.interface` (bindings, the reflected params block, constants), with params by name (a dict, a
    numpy structured scalar, a dataclass) or in order; `alloc(size, dtype, memory=, exportable=)` with
    `device.memory_kinds`, `buffer.map()`, `np.asarray(buffer)` and DLPack where memory stays mapped,
    `from_dlpack(obj)`; `export_memory` / `import_memory` and `export_fence` / `import_fence` for zero-copy
    hand-over between APIs on one GPU.  `ironaccel.testing.execution.ExecutionConformance` checks each rule.
    """

    descriptor: DeviceDescriptor

    def upload(self, array: Any) -> ComputeBuffer:
        """A new device buffer holding a copy of a C-contiguous array, flattened in C order."""
        ...

    def alloc(self, size: int, dtype: Any = "float32") -> ComputeBuffer:
        """A new device buffer of `size` elements (contents undefined)."""
        ...

    def write(self, buffer: ComputeBuffer, array: Any) -> None:
        """Copy a C-contiguous array's bytes into the start of an existing buffer.

        Ordered like everything else: work submitted before it still sees the
        old contents, work after it the new.  `array` may be reused at once.
        """
        ...

    def download(self, buffer: ComputeBuffer, out: Any = None) -> Any:
        """The buffer's contents as a new 1-D array, or its first `out.nbytes` raw bytes into `out`."""
        ...

    def pipeline(
        self,
        code: str | bytes | Sequence[int],
        entry: str = "main",
        *,
        buffers: int,
        params: int = 0,
        workgroup_size: tuple[int, int, int] = (64, 1, 1),
    ) -> Pipeline:
        """Compile `code` (cached per device) into a pipeline with `buffers` bindings and `params` scalars."""
        ...

    def dispatch(
        self,
        pipeline: Pipeline,
        buffers: Sequence[ComputeBuffer],
        groups: int | tuple[int, ...],
        params: Sequence[Any] = (),
    ) -> Submission:
        """Run `pipeline` over `groups` workgroups; returns without waiting."""
        ...

    def synchronize(self) -> None:
        """Block until all work queued on the device has finished."""

    def close(self) -> None:
        """Release the device and everything made on it; later calls raise ClosedError."""
