"""Event: a marker in a stream; record, wait, query, time between two.

Events are cheap to reuse: record the same event again and again.  Timing is
off by default (cheaper record and synchronize); `elapsed_ms` needs two events
created with `timing=True`.  `blocking_sync=True` (CU_EVENT_BLOCKING_SYNC) makes
`synchronize()` put the host thread to sleep until the work is done instead of
spinning on a core: slower to wake, free for other threads while it waits.
"""

from __future__ import annotations

from typing import Any

from . import _core
from ._core import CLOSED
from ._driver import call
from .errors import InvalidState, closed, invalid

__all__ = ["Event", "event_elapsed_ms"]

CU_EVENT_BLOCKING_SYNC = 0x1
CU_EVENT_DISABLE_TIMING = 0x2


class Event(_core.EventCore):
    """A CUDA event.  Use `dev.create_event(timing=False, blocking_sync=False)`; `close()` is idempotent.

    record(stream=None), synchronize(), query() and close() are the hot
    methods, inherited from `_core.EventCore` (which also destroys a
    forgotten event when it is garbage collected).
    """

    __slots__ = ("_blocking",)  # set only on blocking-sync events (the compiled create_event leaves it unset)
    _blocking: bool

    def __init__(self) -> None:
        raise TypeError("create events with Device.create_event() or Stream.record()")

    def _rebind(self, exc: InvalidState) -> None:
        """A thread with no current context (CUDA_ERROR_INVALID_CONTEXT): bind ours, else re-raise."""
        if exc.code != 201:
            raise exc
        _core.bind(self.device._state.ctx)

    def elapsed_ms(self, start: Event) -> float:
        """Milliseconds from `start` to this event; both recorded, completed, with timing on."""
        op = "cuEventElapsedTime"
        if self._h is CLOSED:
            raise closed(op, "event")
        if not isinstance(start, Event):
            raise invalid(op, f"start must be an Event, got {type(start).__name__}")
        if start._h is CLOSED:
            raise closed(op, "start event")
        if not (self.timing and start.timing):
            raise invalid(op, "both events need timing=True (Device.create_event(timing=True))")

        return float(call(op, start._h, self._h))

    @property
    def blocking_sync(self) -> bool:
        """Whether `synchronize()` blocks the host thread (CU_EVENT_BLOCKING_SYNC) rather than spinning."""
        return getattr(self, "_blocking", False)

    @property
    def handle(self) -> int:
        """The CUevent address, for other libraries that take a raw event."""
        if self._h is CLOSED:
            raise closed("Event.handle", "event")
        return int(self._h)

    @property
    def closed(self) -> bool:
        """Whether the event was closed (destroyed); later calls on it raise ClosedError."""
        return self._h is CLOSED

    def __enter__(self) -> Event:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._h is CLOSED else hex(int(self._h))
        blocking = " blocking_sync=True" if self.blocking_sync else ""
        return f"<Event {state} on cuda:{self._ordinal} timing={self.timing}{blocking}>"

    def _bad(self, op: str, stream: Any = None) -> Exception:
        if self._h is CLOSED:
            return closed(op, "event")
        if stream is not None and not isinstance(stream, _core.StreamCore):
            return invalid(op, f"stream must be a Stream, got {type(stream).__name__}")
        return closed(op, "stream")


def event_elapsed_ms(start: Event | int, end: Event | int) -> float:
    """Milliseconds from event `start` to event `end`, each an Event or a CUevent address (another library's
    event): both recorded and completed, with timing on (cuEventElapsedTime; its typed errors say which is not:
    CUDA_ERROR_INVALID_HANDLE for one never recorded or made without timing, CUDA_ERROR_NOT_READY for one not
    completed)."""
    op = "cuEventElapsedTime"
    return float(call(op, _event_handle(start, op, "start event"), _event_handle(end, op, "end event")))


def _event_handle(event: Any, op: str, what: str) -> Any:
    if isinstance(event, Event):
        if event._h is CLOSED:
            raise closed(op, what)
        return event._h
    if isinstance(event, bool) or not isinstance(event, int) or not 0 < event < 1 << 64:
        raise invalid(op, f"the {what} must be an Event or a CUevent address (int), got {event!r}")
    return event
