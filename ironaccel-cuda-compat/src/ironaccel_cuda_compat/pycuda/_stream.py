"""Stream and Event with PyCUDA's semantics; their waits and records are ironaccel's compiled hot calls.

A Stream or Event belongs to the context current when it was made and is
destroyed in it when collected.  `Event()` has timing on (flags 0), as in
PyCUDA; `record()` and `synchronize()` return the event.  `record()` without
a stream records on the legacy default stream of the event's context.
"""

from __future__ import annotations

from typing import Any

from ironaccel import errors as ia
from ironaccel_cuda.event import event_elapsed_ms

from . import _fast
from ._context import Context, _current, _flags, _local, call, cleanup, guarded, run_in
from ._errors import bad_type, from_code, invalid, translate

__all__ = ["Stream", "Event"]

_LEGACY = _fast.LEGACY
_ensure = _fast.ensure
_stream_sync = _fast.stream_sync
_stream_query = _fast.stream_query
_event_record = _fast.event_record
_event_sync = _fast.event_sync
_event_query = _fast.event_query
CU_STREAM_NON_BLOCKING = 0x1


class Stream:
    """pycuda.driver.Stream(flags=0): a stream of the current context (flags 1: non-blocking)."""

    __slots__ = ("handle", "_h", "_ctx", "_nonblocking", "__weakref__")
    handle: int
    _h: Any
    _ctx: Context
    _nonblocking: bool

    def __init__(self, flags: int = 0):
        flags = _flags(flags, "cuStreamCreate")
        ctx = _current("cuStreamCreate")
        h = call("cuStreamCreate", flags)
        self.handle = int(h)
        self._h = self.handle
        self._ctx = ctx
        self._nonblocking = bool(flags & CU_STREAM_NON_BLOCKING)
        if self._nonblocking:
            ctx.nonblocking += 1

    def synchronize(self) -> None:
        """Wait until everything queued on this stream has finished."""
        if not self._ctx._valid:
            raise _detached("cuStreamSynchronize", "stream")
        try:
            _stream_sync(self._h)
        except ia.IronAccelError as exc:
            raise translate(exc, "cuStreamSynchronize") from None

    def is_done(self) -> bool:
        if not self._ctx._valid:
            raise _detached("cuStreamQuery", "stream")
        try:
            return _stream_query(self._h)  # type: ignore[no-any-return]
        except ia.IronAccelError as exc:
            raise translate(exc, "cuStreamQuery") from None

    def wait_for_event(self, evt: Event) -> None:
        """Make later work on this stream wait for `evt`."""
        if not self._ctx._valid:
            raise _detached("cuStreamWaitEvent", "stream")
        try:
            _fast.stream_wait(self._h, _event(evt, "cuStreamWaitEvent")._h)
        except ia.IronAccelError as exc:
            raise translate(exc, "cuStreamWaitEvent") from None

    def __del__(self) -> None:
        ctx: Context | None = getattr(self, "_ctx", None)
        if ctx is None:
            return
        if self._nonblocking:
            ctx.nonblocking -= 1
        h = self.handle
        try:
            cleanup("stream", ctx, lambda: call("cuStreamDestroy", h))
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"<Stream 0x{self.handle:x}>"


class Event:
    """pycuda.driver.Event(flags=0): an event of the current context (timing on unless event_flags say)."""

    __slots__ = ("_h", "_ctx", "__weakref__")
    _h: Any
    _ctx: Context

    def __init__(self, flags: int = 0):
        flags = _flags(flags, "cuEventCreate")
        ctx = _current("cuEventCreate")
        try:
            self._h = _fast.event_create(flags)
        except ia.IronAccelError as exc:
            raise translate(exc, "cuEventCreate") from None
        except OverflowError as exc:
            raise invalid("cuEventCreate", str(exc)) from None
        self._ctx = ctx

    @classmethod
    def _wrap(cls, h: Any, ctx: Context) -> Event:
        e = object.__new__(cls)
        e._h = h
        e._ctx = ctx
        return e

    def record(self, stream: Stream | None = None) -> Event:
        """Record on `stream` (default: the legacy stream of this event's context); returns self."""
        if stream is None:
            ctx = self._ctx
            stack = _local.stack
            if not (stack and stack[-1] is ctx):
                try:
                    recorded = run_in(ctx, lambda: _event_record(self._h, _LEGACY))
                except ia.IronAccelError as exc:
                    raise translate(exc, "cuEventRecord") from None
                if not recorded:
                    raise _detached("cuEventRecord", "event")
                return self
            _ensure(ctx.handle)
            s = _LEGACY
        else:
            try:
                s = stream._h
                live = stream._ctx._valid and self._ctx._valid
            except AttributeError:
                raise bad_type("cuEventRecord", f"stream must be a Stream, not {type(stream).__name__}") from None
            if not live:
                raise _detached("cuEventRecord", "stream's or the event")
        try:
            _event_record(self._h, s)
        except ia.IronAccelError as exc:
            raise translate(exc, "cuEventRecord") from None
        return self

    def synchronize(self) -> Event:
        """Wait until the work before the last record has finished; returns self."""
        # Tried: a fence word set by a memop after each record, spun on here and confirmed by cuEventQuery (so a
        # record made through the raw handle is still waited for): slower than cuEventSynchronize for a timing
        # event, and the row fell behind PyCUDA (ironaccel-cuda/bench/bench_pycuda_compat.py).  Without the
        # confirmation the spin saved a little, but the confirming query of a timing event alone cost more.
        # cuEventSynchronize with no query first measured the same as with it in an A/B: the query overlaps the
        # GPU's wait.
        if not self._ctx._valid:
            raise _detached("cuEventSynchronize", "event")
        try:
            _event_sync(self._h)
        except ia.IronAccelError as exc:
            raise translate(exc, "cuEventSynchronize") from None
        return self

    def query(self) -> bool:
        if not self._ctx._valid:
            raise _detached("cuEventQuery", "event")
        try:
            return _event_query(self._h)  # type: ignore[no-any-return]
        except ia.IronAccelError as exc:
            raise translate(exc, "cuEventQuery") from None

    def time_since(self, event: Event) -> float:
        """Milliseconds from `event` to this one (both recorded and completed, timing on)."""
        return float(guarded("cuEventElapsedTime", event_elapsed_ms, _event(event)._h, _event(self)._h))

    def time_till(self, event: Event) -> float:
        """Milliseconds from this event to `event`."""
        return float(guarded("cuEventElapsedTime", event_elapsed_ms, _event(self)._h, _event(event)._h))

    def ipc_handle(self) -> bytearray:
        """cuIpcGetEventHandle (the event needs event_flags.INTERPROCESS | DISABLE_TIMING)."""
        from ironaccel_cuda import ipc

        op = "cuIpcGetEventHandle"
        return bytearray(guarded(op, ipc.event_handle, _event(self, op)._h))

    @staticmethod
    def from_ipc_handle(handle: Any) -> Event:
        from ironaccel_cuda import ipc

        from ._memory import handle_data

        op = "cuIpcOpenEventHandle"
        data = handle_data(handle, op)
        ctx = _current(op)
        return Event._wrap(guarded(op, ipc.open_event_handle, data), ctx)

    def __del__(self) -> None:
        ctx: Context | None = getattr(self, "_ctx", None)
        if ctx is None:
            return
        h = self._h
        try:
            cleanup("event", ctx, lambda: _fast.event_destroy(h))
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self) -> str:
        return f"<Event 0x{self._h:x}>"


def _event(obj: Any, routine: str = "cuEventElapsedTime") -> Event:
    """`obj`, an Event whose context is still there (a detached context took its events with it)."""
    if not isinstance(obj, Event):
        raise bad_type(routine, f"expected an Event, not {type(obj).__name__}")
    if not obj._ctx._valid:
        raise _detached(routine, "event")
    return obj


def _detached(routine: str, what: str) -> Exception:
    """The LogicError for an object whose context was detached (its handle went with the context)."""
    return from_code(201, routine, f"the {what}'s context was detached")
