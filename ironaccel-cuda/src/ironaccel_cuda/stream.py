"""Stream: an in-order queue of work on one device.

`dev.create_stream()` makes an owned stream (non-blocking by default);
`dev.default_stream` is the device's permanent stream (created once per
process and device, ordered with the legacy default stream, never closed);
`Stream.from_handle(h, dev)` wraps a foreign stream without owning it;
`dev.legacy_stream` and `dev.per_thread_stream` are the driver's implicit
streams (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) of that device.
`s.launch_host_func(fn)` runs a Python callable in stream order (see `hostfn`).
Streams speak `__cuda_stream__` so cuda.core, CuPy and others can use them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from . import _core, _driver
from . import hostfn as _hostfn
from ._core import CLOSED
from ._devices import open_device
from ._driver import call, driver
from .errors import closed, invalid
from .event import Event
from .graph import Graph, GraphNode, _deps

if TYPE_CHECKING:
    from .device import Device

__all__ = ["CaptureInfo", "Stream", "stream_device_ordinal", "stream_non_blocking", "stream_priority"]

_CAPTURE_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}
_CAPTURE_STATUS = ("none", "active", "invalidated")  # CUstreamCaptureStatus, by value

#: The Graph object of each capture in progress, by stream handle: (graph, whether the caller gave it).  One object
#: stands for a capture's graph from `capture_info` (or `begin_capture(graph=)`) to `end_capture`.
_capturing: dict[int, tuple[Graph, bool]] = {}


class CaptureInfo(NamedTuple):
    """A stream's capture now (`Stream.capture_info`): `status` ("none", "active", "invalidated"), the Graph
    being captured into (None when not capturing) and the nodes the next captured work will depend on."""

    status: str
    graph: Graph | None
    dependencies: list[GraphNode]


class Stream(_core.StreamCore):
    """A CUDA stream.  Use `dev.create_stream()`; `close()` is idempotent.

    synchronize(), query(), wait(event) and record(event=None) are the hot
    methods, inherited from `_core.StreamCore`.
    """

    __slots__ = ("device", "_owned", "_permanent", "priority", "non_blocking")
    device: Any
    _owned: bool
    _permanent: bool
    priority: int
    non_blocking: bool

    def __init__(self) -> None:
        raise TypeError("create streams with Device.create_stream() or Stream.from_handle()")

    @classmethod
    def _make(cls, h: Any, device: Device, *, owned: bool, permanent: bool = False, priority: int = 0,
              non_blocking: bool = False) -> Stream:
        s = cls.__new__(cls)
        s._h = int(h)
        s.device = device
        s._ordinal = device.ordinal
        s._owned = owned
        s._permanent = permanent
        s.priority = priority
        s.non_blocking = non_blocking
        return s

    @classmethod
    def from_handle(cls, handle: int | Any, device: Device) -> Stream:
        """A non-owning Stream over a foreign `CUstream` (an int, or an object with `__cuda_stream__`).

        `device` must be the device the stream belongs to; closing the
        wrapper never destroys the foreign stream.
        """
        if hasattr(handle, "__cuda_stream__"):
            handle = handle.__cuda_stream__()[1]
        if isinstance(handle, bool) or not isinstance(handle, int) or not 0 <= handle < 1 << 64:
            raise invalid("Stream.from_handle", f"expected a CUstream address (int), got {handle!r}")
        open_device(device, "Stream.from_handle")
        return cls._make(handle, device, owned=False)

    # -- graphs -------------------------------------------------------------

    def begin_capture(self, mode: str = "thread_local", *, graph: Graph | None = None, after: Any = ()) -> None:
        """Start capturing work issued to this stream into a graph (see `end_capture`).

        With `graph`, the work is captured into that existing graph
        (cuStreamBeginCaptureToGraph), after its nodes `after`, and
        `end_capture` returns that same Graph; the caller still owns it.
        """
        op = "cuStreamBeginCapture" if graph is None else "cuStreamBeginCaptureToGraph"
        if not isinstance(mode, str) or mode not in _CAPTURE_MODES:
            raise invalid(op, f"mode must be one of {sorted(_CAPTURE_MODES)}, got {mode!r}")
        self._check_open(op)
        capture_mode = driver().CUstreamCaptureMode(_CAPTURE_MODES[mode])
        if graph is None:
            if isinstance(after, GraphNode) or (isinstance(after, (list, tuple)) and after):
                raise invalid(op, "after= needs graph=: a new capture's graph has no nodes yet")
            call(op, self._h, capture_mode)
            return
        if not isinstance(graph, Graph):
            raise invalid(op, f"graph must be a Graph, got {type(graph).__name__}")
        graph._check(op)
        deps = _deps(graph, after, op)
        self.device._bind_here()
        call(op, self._h, graph._h, deps, None, len(deps), capture_mode)
        _capturing[int(self._h)] = (graph, True)

    def capture_info(self) -> CaptureInfo:
        """This stream's capture (cuStreamGetCaptureInfo): its status, the Graph being captured into (the same
        object until `end_capture`, which returns it) and the nodes the next captured work will depend on.

        Nodes added to that graph meanwhile (`Graph.add_*`) join the capture
        once `update_capture_dependencies` makes later work depend on them.
        """
        op = "cuStreamGetCaptureInfo"
        self._check_open(op)
        out = call(op, self._h)
        status = _CAPTURE_STATUS[int(out[0])]
        if status != "active":
            return CaptureInfo(status, None, [])
        handle, deps, count = out[2], out[3], int(out[-1])
        known = _capturing.get(int(self._h))
        if known is None or known[0]._h is CLOSED or known[0]._id != int(handle):
            # a stream that joined another's capture (it waited on an event recorded there) shares its Graph
            known = next((k for k in _capturing.values() if k[0]._h is not CLOSED and k[0]._id == int(handle)),
                         (Graph._make(handle, self.device), False))
            _capturing[int(self._h)] = known
        graph = known[0]
        return CaptureInfo(status, graph, [graph._wrap(d) for d in (deps or ())[:count]])

    def update_capture_dependencies(self, nodes: Any, *, add: bool = False) -> None:
        """Make the next work captured on this stream depend on `nodes` (GraphNodes of the capture's graph)
        instead of what it depended on, or as well with `add` (cuStreamUpdateCaptureDependencies)."""
        op = "cuStreamUpdateCaptureDependencies"
        self._check_open(op)
        graph = self.capture_info().graph
        if graph is None:
            raise invalid(op, "the stream is not capturing")
        deps = _deps(graph, nodes, op)
        flags = driver().CUstreamUpdateCaptureDependencies_flags
        flag = flags.CU_STREAM_ADD_CAPTURE_DEPENDENCIES if add else flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES
        try:
            call(op, self._h, deps, None, len(deps), flag)
        except TypeError:  # a binding of the CUDA 12.2 API: no edge data
            call(op, self._h, deps, len(deps), flag)

    def end_capture(self) -> Graph:
        """Stop capturing; returns the captured Graph (holding the host functions captured into it): the one
        given to `begin_capture(graph=)` or met in `capture_info`, else a new one."""

        self._check_open("cuStreamEndCapture")
        known = _capturing.pop(int(self._h), None)
        if known is not None:  # the streams that joined this capture are done with it too
            for key in [k for k, v in _capturing.items() if v[0] is known[0]]:
                del _capturing[key]
        captured = _hostfn.take_captured(self)
        try:
            h = call("cuStreamEndCapture", self._h)
        except BaseException:
            if known is not None and not known[1]:
                known[0]._h = CLOSED  # the driver destroyed the invalidated capture's graph
            raise
        if known is not None and known[0]._h is not CLOSED and known[0]._id == int(h):
            graph = known[0]
        else:
            graph = Graph._make(h, self.device)
        held = {id(entry) for entry in graph._host_funcs}
        graph._host_funcs.extend(entry for entry in captured if id(entry) not in held)
        return graph

    # -- host functions -----------------------------------------------------

    def _watch(self) -> None:
        """From now on, synchronize() and query() raise the failures of host functions run on this stream."""
        if self.__class__ is Stream:
            self.__class__ = _WatchedStream

    def launch_host_func(self, fn: Callable[[], Any]) -> None:
        """Run `fn()` on a driver thread once the work queued before it is done; later work waits for it.

        `fn` takes no arguments (bind them with a closure or functools.partial)
        and must not call CUDA.  It is kept alive until it ran (inside a
        capture: as long as the graph made from it).  An exception inside it
        goes to `sys.unraisablehook` and is raised, as `HostFuncError`, by this
        stream's next `synchronize()` or `query()`.
        """
        self._check_open("cuLaunchHostFunc")
        _hostfn.launch(self, fn)

    @property
    def priority_range(self) -> tuple[int, int]:
        """(least, greatest) stream priority of this stream's device; lower numbers run first."""
        return self.device.stream_priority_range

    @property
    def is_capturing(self) -> bool:
        """Whether a graph capture is recording this stream now (cuStreamIsCapturing), so work is captured, not run."""
        return self.capture_status == "active"

    @property
    def capture_status(self) -> str:
        """This stream's graph capture (cuStreamIsCapturing): "none", "active" (work is captured, not run) or
        "invalidated" (a capture failed and must still be ended with `end_capture`)."""
        op = "cuStreamIsCapturing"
        self._check_open(op)
        return _CAPTURE_STATUS[int(call(op, self._h))]

    # -- interop and lifetime -----------------------------------------------

    @property
    def handle(self) -> int:
        """The CUstream address."""
        self._check_open("Stream.handle")
        return int(self._h)

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)

    @property
    def closed(self) -> bool:
        """Whether the stream was closed (destroyed); later calls on it raise ClosedError."""
        return self._h is CLOSED

    def close(self) -> None:
        """Wait for queued work, then destroy the stream (if owned).  Idempotent.

        The device's default stream is permanent: closing it does nothing.
        """
        h = self._h
        if h is CLOSED or self._permanent:
            return
        self._h = CLOSED
        if self._owned:
            try:
                if not _driver.forked:
                    # relaxed: closing (or collecting) a stream while this thread captures another in global or
                    # thread-local mode keeps that capture (cuda.core's graph/test_options.py)
                    with _driver.relaxed_capture(_driver.driver()):
                        _core.stream_sync(h)
            finally:
                _driver.call("cuStreamDestroy", h)

    def release(self) -> int:
        """Give the stream up without destroying it: its CUstream address, for code that takes its lifetime over
        (another library, or a wrapper of its own); this Stream is closed from then on, with no wait.

        ClosedError once closed; InvalidArgument for the device's permanent and implicit streams, which are
        nobody's to take.
        """
        op = "Stream.release"
        self._check_open(op)
        if self._permanent:
            raise invalid(op, "the device's default, legacy and per-thread streams cannot be released")
        h = int(self._h)
        self._h = CLOSED
        return h

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if self._owned and getattr(self, "_h", CLOSED) is not CLOSED:
            try:
                self.close()
            except Exception:
                pass

    def __repr__(self) -> str:
        state = "closed" if self._h is CLOSED else hex(int(self._h))
        return f"<Stream {state} on cuda:{self._ordinal}>"

    # -- cold helpers -------------------------------------------------------

    def _check_open(self, op: str) -> None:
        if self._h is CLOSED:
            raise closed(op, "stream")

    def _closed_error(self, op: str) -> Exception:
        if self._h is CLOSED:
            return closed(op, "stream")
        return invalid(op, f"bad stream handle {self._h!r}")

    def _bad_event(self, op: str, event: Any) -> Exception:
        if self._h is CLOSED:
            return closed(op, "stream")
        if not isinstance(event, Event):
            return invalid(op, f"expected an Event, got {type(event).__name__}")
        return closed(op, "event")


class _WatchedStream(Stream):
    """A Stream that ran a host function: synchronize() and query() also raise its failures."""

    __slots__ = ()

    def synchronize(self) -> None:
        """Wait until all work queued on this stream has finished; raise a failed host function's error."""
        Stream.synchronize(self)
        if _hostfn._pending:  # a module reference: a function-level import here slowed every call
            _hostfn.raise_pending(self)

    def query(self) -> bool:
        """True when all work queued on this stream has finished; raise a failed host function's error."""
        done = Stream.query(self)
        if done and _hostfn._pending:
            _hostfn.raise_pending(self)
        return done


CU_STREAM_LEGACY = 0x1
CU_STREAM_PER_THREAD = 0x2
CU_STREAM_NON_BLOCKING = 0x1


class _ImplicitStream(_WatchedStream):
    """The legacy or per-thread default stream of one device: its handle means "of the current context",
    so every call first makes the device's context current on the calling thread."""

    __slots__ = ()

    def synchronize(self) -> None:
        self.device._bind_here()
        _WatchedStream.synchronize(self)

    def query(self) -> bool:
        self.device._bind_here()
        return _WatchedStream.query(self)

    def wait(self, event: Any) -> None:
        self.device._bind_here()
        Stream.wait(self, event)

    def record(self, event: Any = None) -> Any:
        self.device._bind_here()
        return Stream.record(self, event)

    def launch_host_func(self, fn: Callable[[], Any]) -> None:
        self.device._bind_here()
        Stream.launch_host_func(self, fn)

    def begin_capture(self, mode: str = "thread_local", *, graph: Graph | None = None, after: Any = ()) -> None:
        self.device._bind_here()
        Stream.begin_capture(self, mode, graph=graph, after=after)

    def close(self) -> None:
        """The implicit streams are never destroyed: closing does nothing."""

    def __repr__(self) -> str:
        kind = "legacy" if int(self._h) == CU_STREAM_LEGACY else "per-thread"
        return f"<Stream {kind} default on cuda:{self._ordinal}>"


# -- any stream by handle: ours or another library's --------------------------------
# What the driver knows of a CUstream, for streams ironaccel did not make (`Stream.from_handle` wants the
# device; a foreign stream's priority and flags are the driver's to say).  CU_STREAM_LEGACY and
# CU_STREAM_PER_THREAD mean the current context's streams, as in every driver call.


def _stream_handle(handle: Any, op: str) -> int:
    if hasattr(handle, "__cuda_stream__"):
        handle = handle.__cuda_stream__()[1]
    if isinstance(handle, bool) or not isinstance(handle, int) or not 0 <= handle < 1 << 64:
        raise invalid(op, f"expected a CUstream address (int) or an object with __cuda_stream__, got {handle!r}")
    return handle


def stream_priority(handle: int | Any) -> int:
    """The priority of any stream, a CUstream address or an object with `__cuda_stream__` (cuStreamGetPriority)."""
    op = "cuStreamGetPriority"
    return int(call(op, _stream_handle(handle, op)))


def stream_non_blocking(handle: int | Any) -> bool:
    """Whether any stream was created non-blocking, i.e. not ordered with the legacy default stream
    (CU_STREAM_NON_BLOCKING of cuStreamGetFlags)."""
    op = "cuStreamGetFlags"
    return bool(int(call(op, _stream_handle(handle, op))) & CU_STREAM_NON_BLOCKING)


def stream_device_ordinal(handle: int | Any) -> int:
    """The ordinal of the device any stream belongs to, from its context (cuStreamGetCtx, then cuCtxGetDevice with
    that context pushed): what `Stream.from_handle` needs for a foreign stream.  Opens no device; the calling
    thread's current context is as it was afterwards."""
    op = "cuStreamGetCtx"
    ctx = call(op, driver().CUstream(_stream_handle(handle, op)))
    call("cuCtxPushCurrent", ctx)
    try:
        return int(call("cuCtxGetDevice"))
    finally:
        call("cuCtxPopCurrent")
        _core.forget_current()


def check_priority(op: str, priority: Any) -> None:
    """InvalidArgument naming `op` unless `priority` is a 32-bit int (what cuStreamCreateWithPriority takes)."""
    if isinstance(priority, bool) or not isinstance(priority, int) or not -(1 << 31) <= priority < 1 << 31:
        raise invalid(op, f"priority must be a 32-bit int, got {priority!r}")


def implicit_stream(device: Device, handle: int) -> Stream:
    """The Stream for CU_STREAM_LEGACY or CU_STREAM_PER_THREAD of `device`."""
    return _ImplicitStream._make(handle, device, owned=False, permanent=True)
