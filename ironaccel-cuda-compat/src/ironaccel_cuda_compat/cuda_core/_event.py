"""cuda.core's `Event`: an ironaccel `Event`, so `sync()`, `is_done` and `close()` are ironaccel's.

`e2 - e1` is the time from e1 to e2 in milliseconds.  `handle` is a
`cuda.bindings.driver.CUevent`.  IPC-enabled events (`EventOptions(ipc_enabled=True)`)
are exported and imported with the driver's event IPC calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ironaccel_cuda.event import event_elapsed_ms

from . import _ia
from ._utils.cuda_utils import check_or_create_options, driver, from_ironaccel, guarded

__all__ = ["Event", "EventOptions"]

CU_EVENT_BLOCKING_SYNC = 0x1
CU_EVENT_DISABLE_TIMING = 0x2
CU_EVENT_INTERPROCESS = 0x4
_IPC_RESERVED = 64  # bytes in a CUipcEventHandle


@dataclass
class EventOptions:
    """`timing_enabled`: allow `e2 - e1`; `blocking_sync`: `sync()` blocks the thread instead of spinning;
    `ipc_enabled`: shareable with other processes (needs timing off)."""

    timing_enabled: bool | None = False
    blocking_sync: bool | None = False
    ipc_enabled: bool | None = False


class Event(_ia.IaEvent):
    """A CUDA event (cuda.core API) that is also an ironaccel_cuda Event."""

    __slots__ = ("_flags", "_context", "_ipc_desc")
    _flags: int
    _context: Any
    _ipc_desc: IPCEventDescriptor  # set on imported events: the descriptor they came from

    sync = _ia.IaEvent.synchronize

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Event objects cannot be instantiated directly. Please use Stream APIs (record).")

    @classmethod
    def _init(cls, device: Any, options: Any = None, context: Any = None, *, bound: bool = False) -> Event:
        if options is None:
            flags = CU_EVENT_DISABLE_TIMING
        else:
            options = check_or_create_options(EventOptions, options, "Event options")
            flags = 0 if options.timing_enabled else CU_EVENT_DISABLE_TIMING
            if options.blocking_sync:
                flags |= CU_EVENT_BLOCKING_SYNC
            if options.ipc_enabled:
                if not bound:
                    raise TypeError("IPC-enabled events must be bound; use Stream.record for creation.")
                if options.timing_enabled:
                    raise TypeError("IPC-enabled events cannot use timing.")
                flags |= CU_EVENT_INTERPROCESS
        if context is not None:  # an event of a given context (a green one's: recorded on its streams)
            e = context._new_event(cls, device, flags)
            e._context = context
        else:
            _ia.ensure(device._state.ctx)
            e = _ia.new_event(cls, _ia.event_create(flags), device, not flags & CU_EVENT_DISABLE_TIMING)
        e._flags = flags
        return e

    # -- cuda.core properties -------------------------------------------------

    @property
    def is_done(self) -> bool:
        return self.query()

    @property
    def is_timing_enabled(self) -> bool:
        return not self._flags & CU_EVENT_DISABLE_TIMING

    @property
    def is_blocking_sync(self) -> bool:
        return bool(self._flags & CU_EVENT_BLOCKING_SYNC)

    @property
    def is_ipc_enabled(self) -> bool:
        return bool(self._flags & CU_EVENT_INTERPROCESS)

    @property
    def is_closed(self) -> bool:
        return self._h is _ia.CLOSED

    @property
    def handle(self) -> Any:  # type: ignore[override]
        """The event as a `cuda.bindings.driver.CUevent`."""
        h = self._h
        if h is _ia.CLOSED:
            return driver.CUevent(0)
        return driver.CUevent(h)

    @property
    def context(self) -> Any:
        """The event's context; None for an event imported from another process."""
        from ._context import Context

        if self.device is None:
            return None
        context = getattr(self, "_context", None)
        if context is not None:
            return context
        return Context._from_ctx(self.device._state.ctx, self.device.ordinal)

    def _rebind(self, exc: Any) -> None:
        if self.device is None:  # imported: no device of ours to bind
            raise exc
        _ia.IaEvent._rebind(self, exc)

    # -- elapsed time -----------------------------------------------------------

    def __sub__(self, other: Any) -> float:
        if not isinstance(other, Event):
            return NotImplemented
        if not (self.is_timing_enabled and other.is_timing_enabled):
            raise RuntimeError("Both Events must be created with timing enabled in order to subtract them; use "
                               "EventOptions(timing_enabled=True) when creating both events.")
        try:
            return event_elapsed_ms(other, self)
        except _ia.DriverError as exc:
            if exc.code == 400:  # CUDA_ERROR_INVALID_HANDLE: one was never recorded
                raise RuntimeError("Both Events must be recorded before they can be subtracted; use Stream.record() "
                                   "to record both events to a stream.") from None
            if exc.code == 600:  # CUDA_ERROR_NOT_READY
                raise RuntimeError("One or both events have not completed; use Event.sync(), Stream.sync(), or "
                                   "Device.sync() to wait for the events to complete before subtracting "
                                   "them.") from None
            raise from_ironaccel(exc) from None

    def __isub__(self, other: object) -> Any:  # type: ignore[misc]  # cuda.core defines it, to refuse
        return NotImplemented

    def __rsub__(self, other: object) -> Any:
        return NotImplemented

    # -- IPC -----------------------------------------------------------------

    @property
    def ipc_descriptor(self) -> IPCEventDescriptor:
        if not self.is_ipc_enabled:
            raise RuntimeError("Event is not IPC-enabled")
        imported = getattr(self, "_ipc_desc", None)
        if imported is not None:
            return imported
        from ironaccel_cuda.ipc import event_handle

        if self.device is not None:  # pickling may run on a thread with no context (multiprocessing's feeder)
            self.device._bind_here()
        return IPCEventDescriptor._init(guarded(event_handle, self._h), self.is_blocking_sync)

    @classmethod
    def from_ipc_descriptor(cls, ipc_descriptor: IPCEventDescriptor) -> Event:
        from ._device import Device

        if not isinstance(ipc_descriptor, IPCEventDescriptor):
            raise TypeError(f"Event.from_ipc_descriptor: ipc_descriptor must be an IPCEventDescriptor, got "
                            f"{type(ipc_descriptor).__name__}")
        reserved = ipc_descriptor._reserved
        if len(reserved) < _IPC_RESERVED:
            raise ValueError(f"IPC event descriptor reserved field is {len(reserved)} bytes; expected at least "
                             f"{_IPC_RESERVED}")
        from ironaccel_cuda.ipc import open_event_handle

        device = Device()
        device._check_context_initialized()
        _ia.ensure(device._state.ctx)
        h = guarded(open_event_handle, bytes(reserved[:_IPC_RESERVED]))
        e = _ia.new_event(cls, h, device, False)
        e._flags = CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS | (
            CU_EVENT_BLOCKING_SYNC if ipc_descriptor._is_blocking_sync else 0)
        e._ipc_desc = ipc_descriptor
        e.device = None  # as in cuda.core: an imported event has no device or context here
        return e

    def __reduce__(self) -> tuple[Any, ...]:
        return (Event.from_ipc_descriptor, (self.ipc_descriptor,))

    # -- protocols ---------------------------------------------------------------

    def __hash__(self) -> int:
        return hash(int(self._h)) if self._h is not _ia.CLOSED else id(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        if self._h is _ia.CLOSED or other._h is _ia.CLOSED:
            return self is other
        return int(self._h) == int(other._h)

    def __repr__(self) -> str:
        if self._h is _ia.CLOSED:
            return "<Event closed>"
        return f"<Event handle={int(self._h):#x}>"


class IPCEventDescriptor:
    """What another process needs to open an IPC-enabled event (picklable)."""

    __slots__ = ("_reserved", "_is_blocking_sync")
    _reserved: bytes
    _is_blocking_sync: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("IPCEventDescriptor objects cannot be instantiated directly. Please use Event APIs.")

    @staticmethod
    def _init(reserved: bytes, is_blocking_sync: Any) -> IPCEventDescriptor:
        self = object.__new__(IPCEventDescriptor)
        self._reserved = bytes(reserved)
        self._is_blocking_sync = bool(is_blocking_sync)
        return self

    def __eq__(self, other: object) -> Any:
        if not isinstance(other, IPCEventDescriptor):
            return NotImplemented
        return self._reserved == other._reserved

    def __hash__(self) -> int:
        return hash(self._reserved)

    def __reduce__(self) -> tuple[Any, ...]:
        return (IPCEventDescriptor._init, (self._reserved, self._is_blocking_sync))


def _reduce_event(event: Event) -> tuple[Any, ...]:
    return event.__reduce__()

