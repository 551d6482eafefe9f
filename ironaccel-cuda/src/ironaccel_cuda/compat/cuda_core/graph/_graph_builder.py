"""cuda.core's `GraphBuilder` (stream capture) and `Graph` over ironaccel's `Graph` / `GraphExec`.

A builder captures the work issued to its stream (`begin_building` / `end_building`,
ironaccel's `Stream.begin_capture` / `end_capture`); `split` forks the capture onto
new streams and `join` brings them back; `complete` instantiates the captured graph
(ironaccel's `Graph.instantiate`) and `Graph.launch` is ironaccel's `GraphExec.launch`.
Child graphs, host callbacks, conditionals and the explicit graph definition wait for
issue 15.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .. import _ia, _needs
from .._missing import missing_error
from .._utils.cuda_utils import CUDAError, call, driver, from_ironaccel

__all__ = ["Graph", "GraphBuilder", "GraphCompleteOptions", "GraphDebugPrintOptions"]

_PRIMARY, _FORKED, _JOINED = 0, 1, 2
_IDLE, _BUILDING, _ENDED = 0, 1, 2
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
    """Instantiation options (`upload_stream` uploads the graph right away)."""

    auto_free_on_launch: bool = False
    upload_stream: Any = None
    device_launch: bool = False
    use_node_priority: bool = False


class GraphBuilder:
    """Builds a graph by capturing the work issued to its stream."""

    __slots__ = ("_stream", "_owns_stream", "_kind", "_state", "_graph", "_closed", "_joined", "__weakref__")
    _stream: Any
    _owns_stream: bool
    _kind: int
    _state: int
    _graph: Any
    _closed: bool
    _joined: list[GraphBuilder]

    def __init__(self) -> None:
        raise RuntimeError("GraphBuilder objects cannot be instantiated directly. Please use Device or Stream APIs.")

    @staticmethod
    def _init(stream: Any, is_stream_owner: bool = False, kind: int = _PRIMARY) -> GraphBuilder:
        self = _new(GraphBuilder)
        self._stream = stream
        self._owns_stream = is_stream_owner
        self._kind = kind
        self._state = _BUILDING if kind == _FORKED else _IDLE
        self._graph = None
        self._closed = False
        self._joined = []
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
        return self._kind != _PRIMARY

    @property
    def is_building(self) -> bool:
        return self._state == _BUILDING

    def begin_building(self, mode: str | None = "relaxed") -> GraphBuilder:
        """Start capturing the builder's stream ("global", "thread_local" or "relaxed")."""
        self._check_open()
        if self._state == _BUILDING:
            raise RuntimeError("Graph builder is already building.")
        if self._state == _ENDED:
            raise RuntimeError("Cannot resume building after building has ended.")
        try:
            _ia.IaStream.begin_capture(self._stream, mode or "relaxed")
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        self._state = _BUILDING
        return self

    def end_building(self) -> GraphBuilder:
        """Stop capturing; the graph is then ready for `complete`."""
        self._check_open()
        if self._state != _BUILDING:
            raise RuntimeError("Graph builder is not building.")
        if self._kind == _FORKED:
            raise RuntimeError("A forked graph builder must be joined before building can end.")
        try:
            self._graph = _ia.IaStream.end_capture(self._stream)
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        self._state = _ENDED
        for other in self._joined:
            other._release_stream()
        self._joined = []
        return self

    def complete(self, options: GraphCompleteOptions | None = None) -> Graph:
        """Instantiate the built graph."""
        self._check_open()
        if self._state != _ENDED or self._graph is None:
            raise RuntimeError("Graph has not finished building.")
        if options is not None and (options.device_launch or options.use_node_priority):
            raise missing_error("GraphCompleteOptions flags", _needs.GRAPH_NODES)
        try:
            exe = self._graph.instantiate(auto_free_on_launch=bool(options is not None and
                                                                   options.auto_free_on_launch))
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        graph = Graph._init(exe)
        if options is not None and options.upload_stream is not None:
            graph.upload(options.upload_stream)
        return graph

    def debug_dot_print(self, path: str, options: GraphDebugPrintOptions | None = None) -> None:
        """Write the built graph in Graphviz DOT form to `path`."""
        if self._graph is None:
            raise RuntimeError("Graph has not finished building.")
        flags = options._to_flags() if options is not None else 0
        call("cuGraphDebugDotPrint", self._graph._h, str(path).encode(), flags)

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
                out.append(GraphBuilder._init(s, is_stream_owner=True, kind=_FORKED))
        finally:
            event.close()
        return tuple(out)

    @staticmethod
    def join(*graph_builders: GraphBuilder) -> GraphBuilder:
        """Join forked builders back into one (the first one that need not join, else the first)."""
        if any(not isinstance(b, GraphBuilder) for b in graph_builders):
            raise TypeError("join takes GraphBuilder objects")
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
            root._joined.append(other)
            root._joined.extend(other._joined)
            other._joined = []
        if root.is_join_required and all(b.is_join_required for b in graph_builders):
            root._kind = _JOINED
        elif root._kind != _PRIMARY and not all(b.is_join_required for b in graph_builders):
            root._kind = _PRIMARY
        return root

    def __cuda_stream__(self) -> tuple[int, int]:
        return self.stream.__cuda_stream__()

    # -- what waits for issue 15 ---------------------------------------------------

    @property
    def graph_definition(self) -> Any:
        raise missing_error("GraphBuilder.graph_definition", _needs.GRAPH_NODES)

    def create_condition(self, default_value: int | None = None) -> Any:
        raise missing_error("GraphBuilder.create_condition", _needs.CONDITIONALS)

    def if_then(self, condition: Any) -> GraphBuilder:
        raise missing_error("GraphBuilder.if_then", _needs.CONDITIONALS)

    def if_else(self, condition: Any) -> tuple[GraphBuilder, GraphBuilder]:
        raise missing_error("GraphBuilder.if_else", _needs.CONDITIONALS)

    def switch(self, condition: Any, count: int) -> tuple[GraphBuilder, ...]:
        raise missing_error("GraphBuilder.switch", _needs.CONDITIONALS)

    def while_loop(self, condition: Any) -> GraphBuilder:
        raise missing_error("GraphBuilder.while_loop", _needs.CONDITIONALS)

    def embed(self, child: GraphBuilder) -> None:
        if not isinstance(child, GraphBuilder):
            raise TypeError(f"child must be a GraphBuilder, got {type(child).__name__}")
        raise missing_error("GraphBuilder.embed", _needs.GRAPH_NODES)

    def callback(self, fn: Any, *, user_data: Any = None) -> None:
        raise missing_error("GraphBuilder.callback", _needs.CALLBACKS)

    # -- lifetime ---------------------------------------------------------------------

    def _release_stream(self) -> None:
        s, self._stream = self._stream, None
        if self._owns_stream and s is not None:
            s.close()

    def close(self) -> None:
        """Release the builder (its own stream, the built graph); the completed Graphs stay valid.  Idempotent."""
        if self._closed and self._stream is None:
            return
        self._closed = True
        if self._state == _BUILDING and self._kind == _PRIMARY and self._stream is not None:
            try:
                self._graph = _ia.IaStream.end_capture(self._stream)
            except _ia.DriverError:
                pass
        for other in self._joined:
            other._release_stream()
        self._joined = []
        graph, self._graph = self._graph, None
        if graph is not None:
            graph.close()
        if self._kind == _PRIMARY or self._state != _BUILDING:
            self._release_stream()

    def __del__(self) -> None:
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass


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
        from .._stream import Stream, Stream_accept, for_device

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
        from .._stream import Stream_accept

        s = Stream_accept(stream)
        if self._exe is None:
            raise RuntimeError("the graph is closed")
        call("cuGraphUpload", self._exe._h, s._h)

    def update(self, source: Any) -> None:
        """Take the parameters of another built graph with the same topology (cuGraphExecUpdate)."""
        from ._graph_definition import GraphDefinition

        if isinstance(source, GraphDefinition):
            raise missing_error("Graph.update from a GraphDefinition", _needs.GRAPH_NODES)
        if not isinstance(source, GraphBuilder):
            raise TypeError(f"expected GraphBuilder or GraphDefinition, got {type(source).__name__}")
        if source._closed:
            raise ValueError("Source graph builder has been closed.")
        if source._graph is None:
            raise ValueError("Graph has not finished building.")
        if self._exe is None:
            raise RuntimeError("the graph is closed")
        try:
            self._exe.update(source._graph)
        except _ia.DriverError as exc:
            import re

            found = re.search(r"update result (\w+)", exc.detail or "")
            why = f" ({found.group(1)})" if found else ""
            raise CUDAError(f"Graph update failed: {exc.code_name or 'error'}{why}", op=exc.op,
                            code=exc.code) from None

    def __getitem__(self, node: Any) -> Any:
        raise missing_error("Graph[node]", _needs.GRAPH_NODES)

    def close(self) -> None:
        """Destroy the executable graph.  Idempotent."""
        exe, self._exe = self._exe, None
        if exe is not None:
            exe.close()


def _instantiate_graph(source: Any, options: GraphCompleteOptions | None = None) -> Graph:
    if isinstance(source, GraphBuilder):
        return source.complete(options)
    raise missing_error("instantiating a GraphDefinition", _needs.GRAPH_NODES)


def _capture_callback_with_tail_failure_for_testing(gb: GraphBuilder, fn: Any, *, user_data: Any = None) -> None:
    raise missing_error("GraphBuilder.callback", _needs.CALLBACKS)
