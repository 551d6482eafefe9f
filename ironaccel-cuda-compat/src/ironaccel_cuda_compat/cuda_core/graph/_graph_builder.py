"""cuda.core's `GraphBuilder` (stream capture) and `Graph` over ironaccel's `Graph` / `GraphExec`.

A builder captures the work issued to its stream (`begin_building` / `end_building`,
ironaccel's `Stream.begin_capture`); the captured graph is an ironaccel `Graph` from the
start of the capture, so conditional bodies, child graphs and host callbacks added during
it belong to that graph.  `split` forks the capture onto new streams and `join` brings
them back; `if_then` / `if_else` / `switch` / `while_loop` add a conditional node whose
bodies are captured on their own streams (cuStreamBeginCaptureToGraph); `embed` adds a
child graph node and `callback` a host function (ironaccel's `hostfn`).  `complete`
instantiates the graph (ironaccel's `Graph.instantiate`) and `Graph.launch` is
ironaccel's `GraphExec.launch`.
"""

from __future__ import annotations

import ctypes
from _ctypes import CFuncPtr  # the base of every ctypes C function pointer
from dataclasses import dataclass, fields
from typing import Any

from .. import _ia
from .._stream import Stream, Stream_accept, for_device
from .._utils.cuda_utils import (
    CUDAError,
    check_or_create_options,
    driver,
    from_ironaccel,
    guarded,
)

__all__ = ["Graph", "GraphBuilder", "GraphCompleteOptions", "GraphDebugPrintOptions"]

_PRIMARY, _FORKED, _BODY = 0, 1, 2
_IDLE, _BUILDING, _ENDED = 0, 1, 2
_CAPTURE_MODES = ("global", "thread_local", "relaxed")
_new = object.__new__
@dataclass
class GraphDebugPrintOptions:
    """Which details `debug_dot_print` writes (CU_GRAPH_DEBUG_DOT_FLAGS_*)."""

    verbose: bool = False
    runtime_types: bool = False
    kernel_node_params: bool = False
    memcpy_node_params: bool = False
    memset_node_params: bool = False
    host_node_params: bool = False
    event_node_params: bool = False
    ext_semas_signal_node_params: bool = False
    ext_semas_wait_node_params: bool = False
    kernel_node_attributes: bool = False
    handles: bool = False
    mem_alloc_node_params: bool = False
    mem_free_node_params: bool = False
    batch_mem_op_node_params: bool = False
    extra_topo_info: bool = False
    conditional_node_params: bool = False

    def _to_flags(self) -> int:
        flags = 0
        enum = driver.CUgraphDebugDot_flags
        for f in fields(self):
            if getattr(self, f.name):
                flags |= int(getattr(enum, "CU_GRAPH_DEBUG_DOT_FLAGS_" + f.name.upper()))
        return flags


@dataclass
class GraphCompleteOptions:
    """Instantiation options (CUDA_GRAPH_INSTANTIATE_FLAG_*); `upload_stream` uploads the graph right away."""

    auto_free_on_launch: bool = False
    upload_stream: Any = None
    device_launch: bool = False
    use_node_priority: bool = False


def _capture_info(stream: Any) -> Any:
    """ironaccel's CaptureInfo of `stream`: (status, the Graph captured into, the nodes next work depends on)."""
    return guarded(_ia.IaStream.capture_info, stream)


def _set_capture_tail(stream: Any, node: Any) -> None:
    """Make `node` (an ironaccel GraphNode) the only dependency of what the capture on `stream` records next."""
    guarded(_ia.IaStream.update_capture_dependencies, stream, [node])


class GraphBuilder:
    """Builds a graph by capturing the work issued to its stream."""

    __slots__ = ("_stream", "_owns_stream", "_kind", "_state", "_graph", "_parent", "_closed", "_joined", "_shared",
                 "_root", "__weakref__")
    _stream: Any
    _owns_stream: bool
    _kind: int
    _state: int
    _graph: Any  # the ironaccel Graph captured into (a forked builder's is its primary's)
    _parent: GraphBuilder | None
    _closed: bool
    _joined: list[GraphBuilder]
    _shared: bool  # a GraphDefinition view holds the graph: closing drops it instead of destroying it
    _root: Any  # a primary builder's: what the captured nodes use, per node (a graph_definition's _Root); or None

    def __init__(self) -> None:
        raise RuntimeError("GraphBuilder objects cannot be instantiated directly. Please use Device or Stream APIs.")

    @staticmethod
    def _init(stream: Any, is_stream_owner: bool = False, kind: int = _PRIMARY, graph: Any = None,
              parent: GraphBuilder | None = None) -> GraphBuilder:
        self = _new(GraphBuilder)
        self._stream = stream
        self._owns_stream = is_stream_owner
        self._kind = kind
        self._state = _BUILDING if kind == _FORKED else _IDLE
        self._graph = graph
        self._parent = parent
        self._closed = False
        self._joined = []
        self._shared = False
        self._root = None
        return self

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Graph builder has been closed.")

    @property
    def stream(self) -> Any:
        self._check_open()
        return self._stream

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def is_join_required(self) -> bool:
        return self._kind == _FORKED

    @property
    def is_building(self) -> bool:
        return self._state == _BUILDING

    def begin_building(self, mode: str = "relaxed") -> GraphBuilder:
        """Start capturing the builder's stream ("global", "thread_local" or "relaxed"; anything else, None
        included, is cuda.core's ValueError)."""
        self._check_open()
        if self._state == _BUILDING:
            raise RuntimeError("Graph builder is already building.")
        if self._state == _ENDED:
            raise RuntimeError("Cannot resume building after building has ended.")
        if mode not in _CAPTURE_MODES:
            raise ValueError(f"Unsupported build mode: {mode}")
        s = self._stream
        try:
            if self._kind == _BODY:
                _ia.IaStream.begin_capture(s, mode, graph=self._graph)
                self._state = _BUILDING
                return self
            _ia.IaStream.begin_capture(s, mode)
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        self._state = _BUILDING
        try:
            graph = _capture_info(s).graph
        except BaseException:
            self._end_capture(check=False)
            raise
        if graph is not None:
            self._graph = graph  # the capture's graph: end_capture hands back this same object
        return self

    def _end_capture(self, check: bool) -> None:
        """End this builder's capture; the host functions captured go to its graph."""
        s = self._stream
        self._state = _ENDED
        try:
            graph = _ia.IaStream.end_capture(s)
        except _ia.DriverError as exc:
            if self._kind == _PRIMARY and self._graph is not None:
                self._graph = None  # the driver destroyed the invalidated capture's graph (ironaccel closed it)
            if check:
                raise from_ironaccel(exc) from None
            return
        if self._graph is None:
            self._graph = graph

    def end_building(self) -> GraphBuilder:
        """Stop capturing; the graph is then ready for `complete`."""
        self._check_open()
        if self._state != _BUILDING:
            raise RuntimeError("Graph builder is not building.")
        if self._kind == _FORKED:
            raise RuntimeError("A forked graph builder must be joined before building can end.")
        self._end_capture(check=True)
        for other in self._joined:
            other._release_stream()
        self._joined = []
        return self

    def complete(self, options: GraphCompleteOptions | None = None) -> Graph:
        """Instantiate the built graph."""
        self._check_open()
        if self._state != _ENDED or self._graph is None or self._kind != _PRIMARY:
            raise RuntimeError("Graph has not finished building.")
        return _instantiate(self._graph, options, self._root)

    def debug_dot_print(self, path: str, options: GraphDebugPrintOptions | None = None) -> None:
        """Write the built graph in Graphviz DOT form to `path`."""
        self._check_open()
        if self._state != _ENDED or self._graph is None:
            raise RuntimeError("Graph has not finished building.")
        flags = _dot_flags(options)
        graph = self._graph
        guarded(lambda: graph.dot(flags=flags, path=str(path)))

    def split(self, count: int) -> tuple[GraphBuilder, ...]:
        """This builder and `count - 1` new ones, each on a new stream that forks from this capture."""
        if count < 2:
            raise ValueError(f"Invalid split count: expecting >= 2, got {count}")
        self._check_open()
        if self._state != _BUILDING:
            raise RuntimeError("Graph builder must be building before it can be split.")
        from .._event import Event
        from .._stream import Stream, StreamOptions

        dev = self._stream.device
        event = Event._init(dev, None)
        try:
            _ia.IaStream.record(self._stream, event)
            out = [self]
            for _ in range(count - 1):
                s = Stream._init(options=StreamOptions(nonblocking=True), device_id=dev.ordinal)
                _ia.IaStream.wait(s, event)
                out.append(GraphBuilder._init(s, is_stream_owner=True, kind=_FORKED, graph=self._graph, parent=self))
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        finally:
            event.close()
        return tuple(out)

    @staticmethod
    def join(*graph_builders: GraphBuilder) -> GraphBuilder:
        """Join builders into one: the first that need not join (else the first); the others are closed."""
        if any(not isinstance(b, GraphBuilder) for b in graph_builders):
            raise TypeError("All arguments must be GraphBuilder instances")
        if len(graph_builders) < 2:
            raise ValueError("Must join with at least two graph builders")
        root = next((b for b in graph_builders if not b.is_join_required), graph_builders[0])
        from .._stream import order_after

        root._check_open()
        dev = root._stream.device
        for other in graph_builders:
            if other is root:
                continue
            other._check_open()
            order_after(root._stream, other._stream, dev)
            other._closed = True
            root._joined.append(other)  # a stream of the capture is released when the capture ends
            root._joined.extend(other._joined)
            other._joined = []
        return root

    def __cuda_stream__(self) -> tuple[int, int]:
        return self.stream.__cuda_stream__()

    # -- the graph as an explicit definition -------------------------------------------

    @property
    def graph_definition(self) -> Any:
        """The graph being built as a GraphDefinition (a view: nodes added through it are part of the graph)."""
        self._check_open()
        if self._kind == _FORKED:
            raise RuntimeError("graph_definition is unavailable on forked graph builders; access it through the "
                               "primary builder instead.")
        if self._state == _BUILDING:
            raise RuntimeError("graph_definition is unavailable while capture is in progress; call end_building() "
                               "first.")
        if self._graph is None:
            raise RuntimeError("graph_definition is unavailable before begin_building() on a primary builder; no "
                               "graph has been created yet.")
        from ._graph_definition import GraphDefinition

        b: GraphBuilder | None = self
        while b is not None:
            b._shared = True
            b = b._parent
        top = _top(self)
        return GraphDefinition._from_graph(self._graph, _root_of(self) if top._graph is self._graph else None)

    # -- conditionals ------------------------------------------------------------------

    def create_condition(self, default_value: int | None = None) -> Any:
        """A condition for a conditional node of this graph; `default_value` is its value at each launch's start."""
        self._check_open()
        flags = 0
        value = 0
        if default_value is not None:
            try:
                value = int(default_value)
            except (TypeError, ValueError):
                raise TypeError(f"default_value must be an int, got {type(default_value).__name__}") from None
            if not 0 <= value < 1 << 32:
                raise ValueError(f"default_value must fit an unsigned 32-bit int, got {default_value!r}")
            flags = 1  # CU_GRAPH_COND_ASSIGN_DEFAULT
        graph = _capture_info(self._stream).graph
        if graph is None:
            raise RuntimeError("Cannot create a condition when graph is not being built")
        handle = guarded(graph.create_condition, value if flags else None)
        from ._graph_definition import GraphCondition

        return GraphCondition._init(handle, graph.handle)

    def _conditional(self, condition: Any, kind: str, size: int) -> tuple[GraphBuilder, ...]:
        self._check_open()
        from ._graph_definition import GraphCondition

        if not isinstance(condition, GraphCondition):
            raise TypeError("condition must be a GraphCondition object (from GraphBuilder.create_condition()), got "
                            f"{type(condition).__name__}")
        s = self._stream
        info = _capture_info(s)
        graph = info.graph
        if graph is None or self._graph is None:
            raise RuntimeError("Cannot add conditional node when not actively capturing")
        node = guarded(lambda: graph.add_conditional(kind.lower(), after=info.dependencies, condition=int(condition),
                                                     branches=size))
        _set_capture_tail(s, node)
        from .._stream import Stream

        out = []
        for body in node.bodies:
            stream = Stream._init(device_id=s.device.ordinal)
            out.append(GraphBuilder._init(stream, is_stream_owner=True, kind=_BODY, graph=body, parent=self))
        return tuple(out)

    def if_then(self, condition: Any) -> GraphBuilder:
        """An "if" node: its body (the builder returned) runs when the condition is non-zero."""
        return self._conditional(condition, "IF", 1)[0]

    def if_else(self, condition: Any) -> tuple[GraphBuilder, GraphBuilder]:
        """An "if" node with an else branch: (builder of the branch for non-zero, builder of the one for zero)."""
        then, otherwise = self._conditional(condition, "IF", 2)
        return then, otherwise

    def switch(self, condition: Any, count: int) -> tuple[GraphBuilder, ...]:
        """A "switch" node of `count` cases: the case numbered by the condition's value runs (none past the end)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a positive int, got {count!r}")
        return self._conditional(condition, "SWITCH", count)

    def while_loop(self, condition: Any) -> GraphBuilder:
        """A "while" node: its body (the builder returned) runs again while the condition is non-zero."""
        return self._conditional(condition, "WHILE", 1)[0]

    # -- child graphs and host callbacks -----------------------------------------------------

    def embed(self, child: GraphBuilder) -> None:
        """Add a copy of `child`'s built graph as one node of the capture (cuGraphAddChildGraphNode)."""
        if not isinstance(child, GraphBuilder):
            raise TypeError(f"child must be a GraphBuilder, got {type(child).__name__}")
        self._check_open()
        if child._state != _ENDED or child._graph is None or child._closed:
            raise ValueError("Child graph has not finished building.")
        if self._state != _BUILDING:
            raise ValueError("Parent graph is not being built.")
        s = self._stream
        info = _capture_info(s)
        graph = info.graph
        if graph is None or self._graph is None:
            raise ValueError("Parent graph is not being built.")
        node = guarded(lambda: graph.add_child(child._graph, after=info.dependencies))
        _set_capture_tail(s, node)
        source = _top(child)._root
        if source is not None:  # the copies of the child's captured nodes use what those nodes use
            from ._graph_node import _import_attachments

            root = _root_of(self)
            embedded = guarded(lambda: node.child.handle)
            root.subgraphs[node.node_handle] = [embedded]
            _import_attachments(source, int(child._graph._h), root, embedded, node.node_handle, graph.handle)

    def callback(self, fn: Any, *, user_data: Any = None) -> None:
        """Run `fn` on a host thread when the graph reaches this point: a Python callable taking no arguments, or a
        ctypes function pointer called with `user_data` (an address, or bytes copied and kept with the graph)."""
        _capture_callback(self, fn, user_data)

    # -- lifetime ---------------------------------------------------------------------

    def _release_stream(self) -> None:
        s, self._stream = self._stream, None
        if self._owns_stream and s is not None:
            s.close()

    def close(self) -> None:
        """Release the builder (its own stream, the built graph); completed Graphs and GraphDefinitions stay valid.
        Idempotent."""
        if self._closed and self._stream is None:
            return
        self._closed = True
        if self._state == _BUILDING and self._kind != _FORKED and self._stream is not None:
            self._end_capture(check=False)
        for other in self._joined:
            other._release_stream()
        self._joined = []
        graph, self._graph = self._graph, None
        self._root = None  # what the nodes use stays with their user objects (and with any GraphDefinition view)
        if graph is not None and self._kind == _PRIMARY and not self._shared:
            graph.close()
        if self._kind != _FORKED or self._state != _BUILDING:
            self._release_stream()
        self._parent = None

    def __del__(self) -> None:
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass


def _capture_callback(gb: GraphBuilder, fn: Any, user_data: Any, find_node: bool = True) -> None:
    """Capture a host function on `gb`'s stream; the graph being built keeps it (and a copy of its user data)."""
    from ironaccel_cuda import hostfn

    gb._check_open()
    s = gb._stream
    graph = gb._graph
    if gb._state != _BUILDING or graph is None or _capture_info(s).graph is None:
        raise RuntimeError("Cannot add callback when graph is not being built")
    try:
        if isinstance(fn, CFuncPtr):
            keep: tuple[Any, ...] = (fn,)
            if user_data is None:
                data = 0
            elif isinstance(user_data, int) and not isinstance(user_data, bool):
                data = user_data
            else:
                try:
                    raw = bytes(memoryview(user_data))
                except TypeError:
                    raise TypeError("user_data must be an int (an address) or bytes-like, got "
                                    f"{type(user_data).__name__}") from None
                copied = ctypes.create_string_buffer(raw, len(raw)) if raw else None
                data = ctypes.addressof(copied) if copied is not None else 0
                keep = (fn, copied)
            hostfn.launch_c(s, int(ctypes.cast(fn, ctypes.c_void_p).value or 0), data)
            _hold_captured(gb, keep, graph._keep, find_node)
            return
        if user_data is not None:
            raise ValueError("user_data is only supported with ctypes function pointers")
        if not callable(fn):
            raise TypeError(f"fn must be callable or a ctypes function pointer, got {type(fn).__name__}")
        _hold_captured(gb, hostfn.launch_kept(s, fn), graph._host_funcs, find_node)
    except _ia.DriverError as exc:
        raise from_ironaccel(exc) from None


def _hold_captured(gb: GraphBuilder, obj: Any, fallback: list[Any], find_node: bool) -> None:
    """The host node just captured on `gb`'s stream (the capture's only dependency now) uses `obj`: hold it for
    that node, through a user object of the capture graph that clones and executables get references to, so
    destroying the node, or an embedded copy's, releases it (as cuda.core does).  A node that cannot be found
    leaves `obj` to the whole graph (`fallback`)."""
    if not find_node:
        fallback.append(obj)
        return
    try:
        info = _capture_info(gb._stream)
        if info.graph is not None and len(info.dependencies) == 1:
            _root_of(gb).attach(info.graph.handle, info.dependencies[0].node_handle, obj)
            return
    except BaseException:
        fallback.append(obj)  # the node exists: what it runs must stay alive
        raise
    fallback.append(obj)


def _top(gb: GraphBuilder) -> GraphBuilder:
    while gb._parent is not None:
        gb = gb._parent
    return gb


def _root_of(gb: GraphBuilder) -> Any:
    """The per-node attachments of the nodes captured by `gb`'s builders (its primary's, made on first use)."""
    top = _top(gb)
    if top._root is None:
        from ._graph_definition import _Root

        top._root = _Root(top._graph)
    return top._root


def _report_callbacks(exe: Any, root: Any) -> None:
    """An executable of a builder's graph holds its captured host functions too, so that each launch reports
    their failures to the launching stream (their lifetime is the driver's user objects')."""
    if root is not None:
        from ._graph_node import _is_host_func

        funcs = [obj for objs in root.attachments.values() for obj in objs if _is_host_func(obj)]
        if funcs:
            exe._hold([], funcs)


def _instantiate(graph: Any, options: GraphCompleteOptions | None, root: Any = None) -> Graph:
    """An executable Graph of an ironaccel Graph, with cuda.core's completion options (`root`: the per-node
    attachments of a builder's captured nodes)."""
    flags: dict[str, bool] = {}
    upload = None
    options = check_or_create_options(GraphCompleteOptions, options, "Graph complete options", keep_none=True)
    if options is not None:
        flags = {"auto_free_on_launch": bool(options.auto_free_on_launch),
                 "device_launch": bool(options.device_launch), "use_node_priority": bool(options.use_node_priority)}
        if options.upload_stream is not None:
            upload = Stream_accept(options.upload_stream, op="Graph.upload")  # before anything is instantiated
    try:
        exe = graph.instantiate(**flags)
    except _ia.DriverError as exc:
        raise from_ironaccel(exc) from None
    _report_callbacks(exe, root)
    out = Graph._init(exe)
    if upload is not None:
        try:
            out.upload(upload)
        except BaseException:
            out.close()  # the executable graph is not handed out: free it now
            raise
    return out


def _dot_flags(options: Any) -> int:
    """The CU_GRAPH_DEBUG_DOT_FLAGS_* of `options` (a GraphDebugPrintOptions, a dict of its fields, or None)."""
    options = check_or_create_options(GraphDebugPrintOptions, options, "Graph debug print options", keep_none=True)
    return 0 if options is None else options._to_flags()


class Graph:
    """An executable graph: `launch(stream)` replays it (ironaccel's GraphExec.launch)."""

    __slots__ = ("_exe", "__weakref__")
    _exe: Any

    def __init__(self) -> None:
        raise RuntimeError("Graph objects cannot be instantiated directly. Please use GraphBuilder APIs.")

    @staticmethod
    def _init(exe: Any) -> Graph:
        self = _new(Graph)
        self._exe = exe
        return self

    @property
    def is_closed(self) -> bool:
        return self._exe is None

    @property
    def handle(self) -> Any:
        exe = self._exe
        if exe is None or exe._h is _ia.CLOSED:
            return driver.CUgraphExec(0)
        return driver.CUgraphExec(int(exe._h))

    def launch(self, stream: Any) -> None:
        """Queue one replay on `stream`."""
        # (no import statement here: one made each replay measurably slower)
        s = stream if stream.__class__ is Stream else Stream_accept(stream)
        exe = self._exe
        if exe is None:
            raise RuntimeError("the graph is closed")
        if s._ordinal != exe._ordinal:
            s = for_device(s, exe._ordinal)
        try:
            exe.launch(s)
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None

    def upload(self, stream: Any) -> None:
        """Upload the graph's work to the device ahead of the first launch (cuGraphUpload)."""
        s = Stream_accept(stream)
        exe = self._exe
        if exe is None:
            raise RuntimeError("the graph is closed")
        if s._ordinal != exe._ordinal:
            s = for_device(s, exe._ordinal)  # the default streams: this device's view of them
        try:
            exe.upload(s)
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None

    def update(self, source: Any) -> None:
        """Take the parameters of another graph with the same topology (cuGraphExecUpdate); from then on this graph
        holds what the source's nodes use, not what it held before."""
        from ._graph_definition import GraphDefinition

        if isinstance(source, GraphDefinition):
            from ._graph_node import update_from_definition

            update_from_definition(self, source)
            return
        if not isinstance(source, GraphBuilder):
            raise TypeError(f"expected GraphBuilder or GraphDefinition, got {type(source).__name__}")
        if source._closed:
            raise ValueError("Source graph builder has been closed.")
        if source._state != _ENDED or source._graph is None:
            raise ValueError("Graph has not finished building.")
        if self._exe is None:
            raise RuntimeError("the graph is closed")
        try:
            self._exe.update(source._graph)
        except _ia.DriverError as exc:
            raise update_error(exc) from None
        _report_callbacks(self._exe, source._root)

    def __getitem__(self, node: Any) -> Any:
        from ._graph_node import executable_node

        return executable_node(self, node)

    def close(self) -> None:
        """Destroy the executable graph.  Idempotent."""
        exe, self._exe = self._exe, None
        if exe is not None:
            exe.close()


def update_error(exc: Any) -> CUDAError:
    """cuda.core's error for a rejected cuGraphExecUpdate: "Graph update failed: <why> (<CUgraphExecUpdateResult>)"."""
    import re

    found = re.search(r"update result (\w+)", exc.detail or "")
    if found is None:
        return from_ironaccel(exc)
    name = found.group(1)
    reason = getattr(driver.CUgraphExecUpdateResult, name, None)
    why = ((reason.__doc__ or "").strip() if reason is not None else "") or exc.code_name or "error"
    return CUDAError(f"Graph update failed: {why} ({name})", op=exc.op, code=exc.code)


def _instantiate_graph(source: Any, options: GraphCompleteOptions | None = None) -> Graph:
    if isinstance(source, GraphBuilder):
        return source.complete(options)
    if isinstance(source, _ia.IaGraph):
        return _instantiate(source, options)
    return source.instantiate(options)


def _capture_callback_with_tail_failure_for_testing(gb: GraphBuilder, fn: Any, *, user_data: Any = None) -> None:
    """cuda.core's test hook: capture the callback as if its node could not be found afterwards (so the whole
    graph holds it), then fail."""
    _capture_callback(gb, fn, user_data, find_node=False)
    fn = None
    raise RuntimeError("forced capture tail discovery failure")
