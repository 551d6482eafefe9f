"""CUDA graphs: capture a stream's work once, replay it cheaply.

    s.begin_capture()
    ... launches, copies, memsets on s ...
    graph = s.end_capture()
    exe = graph.instantiate()
    exe.launch(s)                 # replays everything captured
    exe.update(graph2)            # same topology, new parameters (a re-capture)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _core
from ._core import CLOSED
from ._driver import call, try_call
from .errors import closed, invalid

if TYPE_CHECKING:
    from .device import Device
    from .stream import Stream

__all__ = ["Graph", "GraphExec"]


class _Owned:
    """Lifetime of a handle this object destroys with `_destroy` (idempotent close, context manager, GC)."""

    _h: Any
    _destroy = ""

    @property
    def closed(self) -> bool:
        return self._h is CLOSED

    def close(self) -> None:
        h = self._h
        self._h = CLOSED
        if h is not CLOSED:
            call(self._destroy, h)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_h", CLOSED) is not CLOSED:
            try:
                self.close()
            except Exception:
                pass


class Graph(_Owned):
    """A captured graph.  `close()` destroys it (idempotent); instantiated copies stay valid."""

    _destroy = "cuGraphDestroy"

    def __init__(self) -> None:
        raise TypeError("make graphs with Stream.begin_capture() / Stream.end_capture()")

    @classmethod
    def _make(cls, h: Any, device: Device) -> Graph:
        g = object.__new__(cls)
        g._h = h
        g.device = device
        return g

    @property
    def node_count(self) -> int:
        if self._h is CLOSED:
            raise closed("cuGraphGetNodes", "graph")
        _, count = call("cuGraphGetNodes", self._h, 0)
        return int(count)

    def instantiate(self) -> GraphExec:
        op = "cuGraphInstantiate"
        if self._h is CLOSED:
            raise closed(op, "graph")
        self.device._bind_here()
        return GraphExec._make(call(op, self._h, 0), self.device)


class GraphExec(_Owned):
    """An instantiated graph, ready to launch on any stream of its device."""

    _destroy = "cuGraphExecDestroy"

    def __init__(self) -> None:
        raise TypeError("make executable graphs with Graph.instantiate()")

    @classmethod
    def _make(cls, h: Any, device: Device) -> GraphExec:
        e = object.__new__(cls)
        e._h = int(h)
        e.device = device
        e._ordinal = device.ordinal
        e._default = device._state.default_stream
        return e

    def launch(self, stream: Stream | None = None) -> None:
        """Queue one replay on `stream` (default: the device's default stream)."""
        s = self._default if stream is None else stream
        try:
            if s._ordinal != self._ordinal:
                raise invalid("cuGraphLaunch", f"the stream is on cuda:{s._ordinal}, the graph on cuda:{self._ordinal}")
            _core.graph_launch(self._h, s._h)
        except (TypeError, AttributeError):
            if self._h is CLOSED:
                raise closed("cuGraphLaunch", "graph") from None
            if getattr(s, "_h", None) is CLOSED:
                raise closed("cuGraphLaunch", "stream") from None
            raise invalid("cuGraphLaunch", f"stream must be a Stream, got {type(s).__name__}") from None

    def update(self, graph: Graph) -> None:
        """Take the parameters of `graph` (a re-capture with the same topology) without re-instantiating."""
        op = "cuGraphExecUpdate"
        if self._h is CLOSED:
            raise closed(op, "executable graph")
        if not isinstance(graph, Graph):
            raise invalid(op, f"expected a Graph, got {type(graph).__name__}")
        if graph._h is CLOSED:
            raise closed(op, "graph")
        self.device._bind_here()
        err, info = try_call(op, self._h, graph._h)
        if err:
            result = getattr(getattr(info, "result", None), "name", None)
            from .errors import driver_error

            raise driver_error(err, op, f"update result {result}; re-instantiate instead" if result else None)


