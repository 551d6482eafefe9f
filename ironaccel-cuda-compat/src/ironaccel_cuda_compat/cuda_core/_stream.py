"""cuda.core's `Stream`: an ironaccel `Stream`, so `sync()` is ironaccel's own synchronize.

`Stream.sync`, `wait(event)` and `record(event)` are the very methods of
ironaccel_cuda's `Stream` (the compiled hot path when it is built); a compat Stream
goes wherever an ironaccel Stream goes.  `handle` is a `cuda.bindings.driver.CUstream`
as in cuda.core (ironaccel's is an int).  `LEGACY_DEFAULT_STREAM` and
`PER_THREAD_DEFAULT_STREAM` belong to whichever context is current when used.
"""

from __future__ import annotations

import operator
import os
import warnings
from dataclasses import dataclass
from typing import Any, Protocol

from ironaccel_cuda.stream import stream_device_ordinal, stream_non_blocking, stream_priority

from . import _ia
from ._event import CU_EVENT_INTERPROCESS, Event, EventOptions
from ._utils.cuda_utils import CUDAError, call, check_or_create_options, driver, guarded

__all__ = ["LEGACY_DEFAULT_STREAM", "PER_THREAD_DEFAULT_STREAM", "Stream", "StreamOptions"]

CU_STREAM_LEGACY = 1
CU_STREAM_PER_THREAD = 2
_CONTEXT_RELATIVE = (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD)


@dataclass
class StreamOptions:
    """`nonblocking`: not ordered with the legacy default stream; `priority`: lower numbers run first."""

    nonblocking: bool = True
    priority: int | None = None


class IsStreamType(Protocol):
    def __cuda_stream__(self) -> tuple[int, int]: ...


_PRIORITY = _ia.IaStream.__dict__["priority"]
_DEVICE = _ia.IaStream.__dict__["device"]
_NON_BLOCKING = _ia.IaStream.__dict__["non_blocking"]


class Stream(_ia.IaStream):
    """A CUDA stream (cuda.core API) that is also an ironaccel_cuda Stream."""

    __slots__ = ("_cu", "_owner")
    _cu: Any
    _owner: Any
    _owned: bool
    _permanent: bool
    non_blocking: Any

    sync = _ia.IaStream.synchronize

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Stream objects cannot be instantiated directly. Please use Device APIs (create_stream) "
                           "or other Stream APIs (from_handle).")

    # -- construction ---------------------------------------------------------

    @classmethod
    def _init(cls, obj: Any = None, options: Any = None, device_id: int | None = None, ctx: Any = None) -> Stream:
        from ._device import Device

        if obj is not None:
            if options is not None:
                raise ValueError("obj and options cannot be both specified")
            return cls._from_protocol(obj)
        options = check_or_create_options(StreamOptions, options, "Stream options")
        dev = Device(device_id)
        if ctx is None:
            ctx = dev._green_current
            dev._check_context_initialized()
        priority = options.priority
        if priority is not None:
            least, greatest = dev.stream_priority_range
            if not greatest <= priority <= least:
                raise ValueError(f"priority={priority} is out of range [{greatest}, {least}]")
        else:
            priority = 0
        if ctx is not None and ctx.is_green:
            return ctx._new_stream(cls, dev, bool(options.nonblocking), priority)  # type: ignore[no-any-return]
        # int(): what the binding's C int conversion made of a numpy int or a float
        made = guarded(_ia.IaDevice.create_stream, dev, int(priority), bool(options.nonblocking))
        s: Any = cls._make(made.release(), dev, owned=True, priority=priority, non_blocking=bool(options.nonblocking))
        s._cu = None
        s._owner = None
        return s

    @classmethod
    def _context_relative(cls, handle: int) -> Stream:
        s = cls.__new__(cls)
        s._h = int(handle)
        s._ordinal = -1
        _DEVICE.__set__(s, None)
        s._owned = False
        s._permanent = True
        _PRIORITY.__set__(s, None)
        s.non_blocking = False
        s._cu = None
        s._owner = None
        return s

    @classmethod
    def _legacy_default(cls) -> Stream:
        return cls._context_relative(CU_STREAM_LEGACY)

    @classmethod
    def _per_thread_default(cls) -> Stream:
        return cls._context_relative(CU_STREAM_PER_THREAD)

    @classmethod
    def _from_address(cls, handle: int, owner: Any = None) -> Stream:
        from ._device import Device

        if handle in _CONTEXT_RELATIVE:
            s = cls._context_relative(handle)
        else:
            ordinal = _stream_ordinal(handle)
            s = cls._make(handle, Device(ordinal), owned=False, priority=None, non_blocking=None)  # type: ignore
            s._cu = None
        s._owner = owner
        return s

    @classmethod
    def _from_protocol(cls, obj: Any) -> Stream:
        try:
            info = obj.__cuda_stream__()
        except AttributeError:
            raise TypeError(f"{type(obj).__name__} object does not have a '__cuda_stream__' method") from None
        if not isinstance(info, tuple) or len(info) != 2:
            raise RuntimeError(f"obj.__cuda_stream__ must return a sequence with 2 elements, got {type(info)}")
        if info[0] != 0:
            raise RuntimeError(f"The first element of the sequence returned by obj.__cuda_stream__ must be 0, "
                               f"got {info[0]!r}")
        return cls._from_address(int(info[1]), owner=obj)

    @staticmethod
    def from_handle(handle: Any) -> Stream:  # type: ignore[override]  # cuda.core's signature: no device
        """A non-owning Stream over a foreign CUstream address (its device is found from its context).

        `handle` is an int or any integer-like object (`__index__`), such as a `cuda.bindings.driver.CUstream`,
        as cuda.core converts it to a pointer.
        """
        if handle.__class__ is not int:
            if isinstance(handle, bool):
                raise TypeError(f"Stream handle must be an int, got {type(handle).__name__}")
            try:
                handle = operator.index(handle)
            except TypeError:
                raise TypeError(f"Stream handle must be an int or a CUstream, got {type(handle).__name__}") from None
        if not 0 <= handle < 1 << 64:
            raise OverflowError(f"Stream.from_handle: {handle} is not a CUstream address (an unsigned 64-bit int)")
        return Stream._from_address(handle)

    # -- cuda.core properties and methods ------------------------------------

    @property
    def handle(self) -> Any:  # type: ignore[override]
        """The stream as a `cuda.bindings.driver.CUstream`."""
        cu = self._cu
        if cu is None:
            if self._h is _ia.CLOSED:
                return driver.CUstream(0)
            cu = self._cu = driver.CUstream(int(self._h))
        return cu

    def __cuda_stream__(self) -> tuple[int, int]:
        h = self._h
        if h is _ia.CLOSED:
            raise _ia.ClosedError("cuda", "Stream.__cuda_stream__", "stream")
        return (0, int(h))

    @property
    def is_closed(self) -> bool:
        return self._h is _ia.CLOSED

    @property  # type: ignore[override]
    def priority(self) -> int:
        value = _PRIORITY.__get__(self)
        if value is None:
            value = int(guarded(stream_priority, self._h))
        return value

    @priority.setter
    def priority(self, value: Any) -> None:
        _PRIORITY.__set__(self, value)

    @property
    def is_nonblocking(self) -> bool:
        value = _NON_BLOCKING.__get__(self)
        if value is None:
            value = guarded(stream_non_blocking, self._h)
        return bool(value)

    @property  # type: ignore[override]
    def device(self) -> Any:
        """The stream's Device; for the default streams, the current one."""
        from ._device import Device

        dev = _DEVICE.__get__(self)
        return Device() if dev is None else dev

    @device.setter
    def device(self, value: Any) -> None:
        _DEVICE.__set__(self, value)

    @property
    def context(self) -> Any:
        from ._context import Context

        owner = getattr(self, "_owner", None)
        if owner.__class__ is Context:  # a green context's stream
            return owner
        dev = _DEVICE.__get__(self)
        if dev is None:
            ctx = _ia.current_context()
            if not ctx:
                raise CUDAError("CUDA_ERROR_INVALID_CONTEXT: no context is current (call Device.set_current())")
            return Context._from_ctx(ctx, self.device.ordinal)
        return Context._from_ctx(dev._state.ctx, dev.ordinal)

    @property
    def resources(self) -> Any:
        """The resources of this stream's context (a green context's partition, or the whole device)."""
        from ._device_resources import DeviceResources

        context = self.context
        return DeviceResources._init(context._device_id, context)

    # Record `event` (a new one made with `options` if None) on this stream; returns it.  Compiled for an event of
    # its own (`_core.compat_stream_record`), else `_record_cold`.
    record = _ia.compat_stream_record

    def _record_cold(self, event: Any, options: Any) -> Any:
        if event is None:
            owner = getattr(self, "_owner", None)
            device = self.device
            if getattr(owner, "_green", None) is not None:
                event = _event_in(owner, device, options)
            elif getattr(device, "_green_current", None) is not None:  # a primary-context stream
                from ._context import Context

                event = _event_in(Context._from_ctx(device._state.ctx, device.ordinal), device, options)
            elif options is None:
                event = device.create_event(None)
            else:
                event = Event._init(device, options, bound=True)
        elif event.__class__ is Event and event._flags & CU_EVENT_INTERPROCESS:
            raise TypeError("IPC-enabled events should not be re-recorded, instead create a new event by supplying "
                            "options.")
        return _record(self, event)

    def wait(self, event_or_stream: Any) -> None:  # type: ignore[override]
        """Make later work here wait for an Event, or for everything queued so far on another stream."""
        if isinstance(event_or_stream, _ia.IaEvent):
            _ia.IaStream.wait(self, event_or_stream)
            return
        if isinstance(event_or_stream, _ia.IaStream):
            other = event_or_stream
        else:
            try:
                other = Stream._from_protocol(event_or_stream)
            except (TypeError, RuntimeError):
                raise ValueError("only an Event, Stream, or object supporting __cuda_stream__ can be waited, got "
                                 f"{type(event_or_stream)}") from None
        order_after(self, other, other.device if isinstance(other, Stream) else self.device)

    def create_graph_builder(self) -> Any:
        from .graph._graph_builder import GraphBuilder

        return GraphBuilder._init(stream=self, is_stream_owner=False)

    def close(self) -> None:
        super().close()
        self._owner = None

    def __del__(self) -> None:
        if getattr(self, "_owned", False):  # not set when construction was refused
            super().__del__()

    def __hash__(self) -> int:
        return hash(int(self._h)) if self._h is not _ia.CLOSED else id(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stream):
            return NotImplemented
        if self._h is _ia.CLOSED or other._h is _ia.CLOSED:
            return self is other
        return int(self._h) == int(other._h)

    def __repr__(self) -> str:
        if self._h is _ia.CLOSED:
            return "<Stream closed>"
        try:  # cuda.core's format; the context as cuda.core finds it (Context.handle)
            ctx = int(self.context.handle)
        except Exception:
            return f"<Stream handle={int(self._h):#x}>"
        return f"<Stream handle={int(self._h):#x} context={ctx:#x}>"


def _event_in(context: Any, device: Any, options: Any) -> Any:
    """A new event of `context` (the context of the stream it is recorded on)."""
    return Event._init(device, options, context=context, bound=True)


def _stream_ordinal(handle: int) -> int:
    """The device of a foreign stream, from its context (cold; opens no other device to compare contexts)."""
    return int(guarded(stream_device_ordinal, handle))


def order_after(waiter: Any, producer: Any, device: Any) -> None:
    """Make stream `waiter` wait for the work queued so far on stream `producer` (through an event of `device`)."""
    event = _ia.IaDevice.create_event(device)
    try:
        _ia.IaStream.record(producer, event)
        _ia.IaStream.wait(waiter, event)
    finally:
        event.close()


_resolved: dict[tuple[int, int], Any] = {}


def for_device(s: Any, ordinal: int) -> Any:
    """`s` as a stream ironaccel can use for work on device `ordinal` (the default streams get a per-device view)."""
    if s._ordinal != -1:
        return s
    key = (int(s._h), ordinal)
    view = _resolved.get(key)
    if view is None:
        from ._device import Device

        view = _resolved[key] = _ia.IaStream.from_handle(key[0], Device(ordinal))
    return view


def default_stream() -> Stream:
    """The default stream cuda.core uses: per-thread when CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM is set."""
    if os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0") not in ("", "0"):
        return PER_THREAD_DEFAULT_STREAM
    return LEGACY_DEFAULT_STREAM


def Stream_accept(arg: Any, allow_stream_protocol: bool = False, op: str = "cuda.core") -> Any:
    """`arg` as a stream: a Stream (compat or ironaccel), a GraphBuilder's stream, or (deprecated) a protocol object.

    A closed stream is ironaccel's ClosedError naming `op` (its handle would reach the driver as a raw TypeError)."""
    if arg.__class__ is Stream and arg._h is not _ia.CLOSED:
        return arg
    if arg is None:
        raise TypeError("stream is required and must not be None")
    if isinstance(arg, _ia.IaStream):
        if arg._h is _ia.CLOSED:
            raise _ia.ClosedError("cuda", op, "stream")
        return arg
    from .graph._graph_builder import GraphBuilder

    if isinstance(arg, GraphBuilder):
        return arg.stream
    if allow_stream_protocol and hasattr(arg, "__cuda_stream__"):
        warnings.warn("Passing foreign stream objects to this function via the stream protocol is deprecated. "
                      "Convert the object explicitly using Stream(obj) instead.", DeprecationWarning, stacklevel=3)
        return Stream._from_protocol(arg)
    raise TypeError(f"stream must be a Stream or a GraphBuilder, got {type(arg).__name__}")


_record = _ia.IaStream.record
LEGACY_DEFAULT_STREAM = Stream._legacy_default()
PER_THREAD_DEFAULT_STREAM = Stream._per_thread_default()


_ia.set_compat_events(Event, EventOptions)
