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

    def probe(self) -> ProbeResult: ...

    def devices(self) -> Sequence[DeviceDescriptor]: ...

    def open(self, ordinal: int = 0) -> Any: ...


@runtime_checkable
class Event(Protocol):
    """A marker in a stream: record, wait for it, time between two."""

    def record(self, stream: Stream | None = None) -> None: ...

    def synchronize(self) -> None: ...

    def query(self) -> bool:
        """True when all work before the record has completed."""
        ...

    def elapsed_ms(self, start: Event) -> float:
        """Milliseconds from `start` to this event (both recorded, timing on)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Stream(Protocol):
    """An in-order queue of device work."""

    def synchronize(self) -> None: ...

    def query(self) -> bool:
        """True when all submitted work has completed."""
        ...

    def wait(self, event: Event) -> None:
        """Make later work on this stream wait for `event`."""
        ...

    def record(self, event: Event | None = None) -> Event: ...

    def close(self) -> None: ...


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

    def close(self) -> None: ...


@runtime_checkable
class Device(Protocol):
    """An opened device with explicit streams, events and memory."""

    descriptor: DeviceDescriptor

    def synchronize(self) -> None: ...

    def create_stream(self) -> Stream: ...

    def create_event(self, timing: bool = False) -> Event: ...

    def alloc(self, size: int, dtype: Any = "uint8", stream: Stream | None = None) -> Buffer: ...

    def close(self) -> None: ...


@runtime_checkable
class ComputeBuffer(Protocol):
    """Memory owned by a ComputeDevice: 1-D, `size` elements of `dtype`."""

    dtype: DType
    size: int
    nbytes: int

    def close(self) -> None: ...


@runtime_checkable
class Pipeline(Protocol):
    """Compiled device code with a fixed number of buffer bindings."""

    entry: str
    buffers: int

    def close(self) -> None: ...


@runtime_checkable
class Submission(Protocol):
    """Work handed to the device; wait() blocks until it has finished."""

    def wait(self, timeout: float | None = None) -> None: ...

    def done(self) -> bool: ...


@runtime_checkable
class ComputeDevice(Protocol):
    """The cross-vendor compute surface.

    Code is backend-native: CUDA C++ or PTX (cuda), SPIR-V words (vulkan),
    WGSL (webgpu), GLSL 430 (opengl).  Each kernel takes `buffers` storage
    buffers, bound in order (binding 0, 1, ... / the first kernel arguments)
    and an optional list of 32-bit scalar `params` (numpy scalars), delivered
    as push constants (vulkan), a uniform buffer at binding `buffers` (webgpu),
    a std140 uniform block at binding 0 (opengl) or by-value kernel arguments
    after the buffers (cuda).  Each code declares its own workgroup size;
    `workgroup_size` tells backends whose code cannot declare it (CUDA's block).

    Ordering: every call on one ComputeDevice is ordered after every earlier
    call on it, as on one in-order queue (`write` included).  `dispatch` returns at once with a
    `Submission`; `download` waits for the work before it and returns the data;
    `synchronize` waits for everything.  Objects of one device used on
    another, and any use after `close`, raise typed errors naming the op.
    """

    descriptor: DeviceDescriptor

    def upload(self, array: Any) -> ComputeBuffer:
        """A new device buffer holding a copy of a 1-D contiguous numpy array."""
        ...

    def alloc(self, size: int, dtype: Any = "float32") -> ComputeBuffer:
        """A new device buffer of `size` elements (contents undefined)."""
        ...

    def write(self, buffer: ComputeBuffer, array: Any) -> None:
        """Copy a C-contiguous array into the start of an existing buffer.

        Ordered like everything else: work submitted before it still sees the
        old contents, work after it the new.  `array` may be reused at once.
        """
        ...

    def download(self, buffer: ComputeBuffer, out: Any = None) -> Any:
        """The buffer's contents as a new numpy array, or into `out`."""
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
        """Compile `code` into a pipeline with `buffers` bindings and `params` scalars."""
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

    def synchronize(self) -> None: ...

    def close(self) -> None: ...
