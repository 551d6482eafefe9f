"""NVIDIA cuda.core 1.2's driver-level API, built on ironaccel_cuda's own objects.

    from ironaccel_cuda_compat import cuda_core
    cuda_core.install()             # from now on `import cuda.core` anywhere gives this module
    from cuda.core import Device, LaunchConfig, launch
    dev = Device(0); dev.set_current()
    s = dev.create_stream()
    ...

Every hot method is ironaccel's: `Stream.sync()` *is* ironaccel's `Stream.synchronize`
(a compat Stream is an ironaccel Stream), `Event.sync()` ironaccel's
`Event.synchronize`, `DeviceMemoryResource.allocate` / `Buffer.close` ironaccel's
stream-ordered `Device.alloc` / `DeviceBuf.close`, `launch` ironaccel's
`Function.launch`, `Graph.launch` ironaccel's `GraphExec.launch`.  The compat itself
never imports cuda.core; names that wait for ironaccel features are importable and
raise `Unsupported` (a NotImplementedError) saying which feature, when used.

Coverage map (rendered from `_coverage.ENTRIES`):

"""

from __future__ import annotations

from . import _coverage, checkpoint, graph, system, texture, typing, utils  # noqa: F401 (submodules, after the classes)
from ._context import Context, ContextOptions
from ._device import Device
from ._device_resources import (
    DeviceResources,
    SMResource,
    SMResourceOptions,
    WorkqueueResource,
    WorkqueueResourceOptions,
)
from ._event import Event, EventOptions
from ._graphics import GraphicsResource
from ._host import Host
from ._install import install as install
from ._install import installed as installed
from ._launch_config import LaunchConfig
from ._launcher import launch
from ._linker import Linker, LinkerOptions
from ._memory import (
    Buffer,
    DeviceMemoryResource,
    DeviceMemoryResourceOptions,
    GraphMemoryResource,
    LegacyPinnedMemoryResource,
    ManagedBuffer,
    ManagedMemoryResource,
    ManagedMemoryResourceOptions,
    MemoryResource,
    PinnedMemoryResource,
    PinnedMemoryResourceOptions,
    VirtualMemoryResource,
    VirtualMemoryResourceOptions,
)
from ._module import Kernel, ObjectCode
from ._program import Program, ProgramOptions
from ._stream import LEGACY_DEFAULT_STREAM, PER_THREAD_DEFAULT_STREAM, Stream, StreamOptions
from ._tensor_map import TensorMapDescriptor, TensorMapDescriptorOptions

__version__ = "1.2.0"  # the cuda.core API this module implements

__all__ = [
    "Buffer", "Context", "ContextOptions", "Device", "DeviceMemoryResource", "DeviceMemoryResourceOptions",
    "DeviceResources", "Event", "EventOptions", "GraphMemoryResource", "GraphicsResource", "Host", "Kernel",
    "LEGACY_DEFAULT_STREAM", "LaunchConfig", "LegacyPinnedMemoryResource", "Linker", "LinkerOptions", "ManagedBuffer",
    "ManagedMemoryResource", "ManagedMemoryResourceOptions", "MemoryResource", "ObjectCode",
    "PER_THREAD_DEFAULT_STREAM", "PinnedMemoryResource", "PinnedMemoryResourceOptions", "Program", "ProgramOptions",
    "SMResource", "SMResourceOptions", "Stream", "StreamOptions", "TensorMapDescriptor", "TensorMapDescriptorOptions",
    "VirtualMemoryResource", "VirtualMemoryResourceOptions", "WorkqueueResource", "WorkqueueResourceOptions",
    "launch",
]

__doc__ = (__doc__ or "") + _coverage.render()


