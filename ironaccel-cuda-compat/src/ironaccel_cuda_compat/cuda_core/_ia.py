"""The ironaccel_cuda internals the compat layer builds on, named in one place.

Everything the compat needs from ironaccel_cuda beyond its public classes -- the
compiled core's functions (`_core`), the cold driver call (`_driver.call`), the
per-device state, the DLPack structures -- is imported here and nowhere else, so a
change inside ironaccel_cuda is a change to this file.  The public classes it subclasses or wraps: `Device`, `Stream`,
`GreenContext`, `Event`, `DeviceBuf`, `PinnedBuf`, `Module`, `Library`, `Function`, `Program`, `Graph`,
`GraphExec`.
"""

from __future__ import annotations

from typing import Any

from ironaccel_cuda import _core, _driver
from ironaccel_cuda import _dlpack as dlpack
from ironaccel_cuda.batched import CopyAttributes, copy_batch
from ironaccel_cuda.context import GreenContext as IaGreenContext
from ironaccel_cuda.device import Device as IaDevice
from ironaccel_cuda.device import current_context_handle, device_count
from ironaccel_cuda.errors import ClosedError, CompileError, DriverError, InvalidArgument, InvalidState, Unsupported
from ironaccel_cuda.event import Event as IaEvent
from ironaccel_cuda.graph import Graph as IaGraph
from ironaccel_cuda.graph import GraphExec as IaGraphExec
from ironaccel_cuda.library import Library as IaLibrary
from ironaccel_cuda.memory import DeviceBuf, PinnedBuf, adopt
from ironaccel_cuda.module import Function as IaFunction
from ironaccel_cuda.module import LaunchConfig as IaLaunchConfig
from ironaccel_cuda.module import Module as IaModule
from ironaccel_cuda.module import settle_lazy_load
from ironaccel_cuda.program import ObjectCode as IaObjectCode
from ironaccel_cuda.program import Program as IaProgram
from ironaccel_cuda.stream import Stream as IaStream

__all__ = [
    "CLOSED", "ClosedError", "CompatBuffer", "CompileError", "CopyAttributes", "DeviceBuf", "DriverError",
    "IaDevice", "IaEvent", "IaFunction", "IaGraph", "IaGraphExec", "IaGreenContext", "IaLaunchConfig", "IaLibrary",
    "IaModule", "IaObjectCode", "IaProgram", "IaStream", "InvalidArgument", "InvalidState", "PinnedBuf",
    "Unsupported", "adopt", "all_instances", "bind", "bind_address", "call", "compat_create_event",
    "compat_device_allocate", "compat_dmr_allocate", "compat_stream_record", "copy_batch", "current_context",
    "device_count", "dlpack", "driver", "ensure", "event_create", "memcpy_dtod", "memcpy_dtoh", "memcpy_htod",
    "new_event", "set_compat_buffer", "set_compat_events", "settle_lazy_load", "state_for", "try_call",
]

CLOSED = _core.CLOSED
CompatBuffer = _core.CompatBuffer
compat_dmr_allocate = _core.compat_dmr_allocate
compat_device_allocate = _core.compat_device_allocate
set_compat_buffer = _core.set_compat_buffer
set_compat_events = _core.set_compat_events
compat_create_event = _core.compat_create_event
compat_stream_record = _core.compat_stream_record
all_instances = _core.all_instances
call = _driver.call
try_call = _driver.try_call
driver = _driver.driver
bind = _core.bind
ensure = _core.ensure
event_create = _core.event_create
memcpy_dtod = _core.memcpy_dtod
memcpy_htod = _core.memcpy_htod
memcpy_dtoh = _core.memcpy_dtoh


def current_context() -> int:
    """The address of the calling thread's current CUDA context (0 for none)."""
    return current_context_handle()


def state_for(ordinal: int) -> Any:
    """ironaccel's shared per-device state, made without changing the thread's current context.

    ironaccel makes a device's primary context current the first time the device is
    opened; cuda.core does that only in `Device.set_current()`, so the previous
    context (or none) is restored here.
    """
    before = current_context()
    st = IaDevice(ordinal)._state  # opening a Device makes its primary context current: undone below
    if current_context() != before:
        bind_address(before)
    return st


def bind_address(ctx: int) -> None:
    """Make the context at address `ctx` (0: none) current on this thread, through ironaccel."""
    bind(driver().CUcontext(ctx))


def new_event(cls: Any, h: int, device: Any, timing: bool) -> Any:
    """An instance of `cls` (an ironaccel Event subclass) over the created event `h` of `device`."""
    e = cls.__new__(cls)
    e._h = h
    e.device = device
    e._ordinal = device.ordinal
    e.timing = timing
    e._default = device._state.default_stream
    return e
