"""The ironaccel_cuda internals the compat layer builds on, named in one place.

Everything the compat needs from ironaccel_cuda beyond its public classes -- the
hot-path contract (`_hot`), the cold driver call (`_driver.call`), the per-device
state -- is imported here and nowhere else, so a change inside ironaccel_cuda is a
change to this file.  The public classes it subclasses or wraps: `Device`, `Stream`,
`Event`, `DeviceBuf`, `PinnedBuf`, `Module`, `Function`, `Program`, `Graph`,
`GraphExec`.
"""

from __future__ import annotations

from typing import Any

from ironaccel_cuda import _driver, _hot
from ironaccel_cuda.device import Device as IaDevice
from ironaccel_cuda.device import _state_for, device_count
from ironaccel_cuda.errors import ClosedError, CompileError, DriverError, InvalidArgument, InvalidState, Unsupported
from ironaccel_cuda.event import Event as IaEvent
from ironaccel_cuda.graph import Graph as IaGraph
from ironaccel_cuda.graph import GraphExec as IaGraphExec
from ironaccel_cuda.memory import DeviceBuf, PinnedBuf, adopt
from ironaccel_cuda.module import Function as IaFunction
from ironaccel_cuda.module import Module as IaModule
from ironaccel_cuda.program import ObjectCode as IaObjectCode
from ironaccel_cuda.program import Program as IaProgram
from ironaccel_cuda.stream import Stream as IaStream

__all__ = [
    "CLOSED", "ClosedError", "CompileError", "DeviceBuf", "DriverError", "IaDevice", "IaEvent", "IaFunction",
    "IaGraph", "IaGraphExec", "IaModule", "IaObjectCode", "IaProgram", "IaStream", "InvalidArgument", "InvalidState",
    "PinnedBuf", "Unsupported", "adopt", "bind", "bind_address", "call", "current_context", "device_count", "devptr", "driver",
    "ensure", "event_create", "event_handle", "memcpy_dtod", "memcpy_dtoh", "memcpy_htod", "state_for", "stream_handle", "to_int",
    "try_call",
]

CLOSED = _hot.CLOSED
call = _driver.call
try_call = _driver.try_call
driver = _driver.driver
stream_handle = _hot.stream_handle
event_handle = _hot.event_handle
devptr = _hot.devptr
to_int = _hot.to_int
bind = _hot.bind
ensure = _hot.ensure
event_create = _hot.event_create
memcpy_dtod = _hot.memcpy_dtod
memcpy_htod = _hot.memcpy_htod
memcpy_dtoh = _hot.memcpy_dtoh


def current_context() -> int:
    """The address of the calling thread's current CUDA context (0 for none)."""
    return int(call("cuCtxGetCurrent"))


def state_for(ordinal: int) -> Any:
    """ironaccel's shared per-device state, made without changing the thread's current context.

    ironaccel makes a device's primary context current the first time the device is
    opened; cuda.core does that only in `Device.set_current()`, so the previous
    context (or none) is restored here.
    """
    before = current_context()
    st = _state_for(ordinal)
    if current_context() != before:
        bind_address(before)
    return st


def bind_address(ctx: int) -> None:
    """Make the context at address `ctx` (0: none) current on this thread, through ironaccel."""
    bind(driver().CUcontext(ctx))
