"""cuda.core's explicit graphs (`GraphDefinition`, `GraphCondition`) over ironaccel's `Graph`.

A root definition owns an ironaccel `Graph` (which destroys the CUgraph); a child
graph's or a conditional branch's definition is a view that keeps its root alive.
The objects the nodes use (kernels and their arguments, buffers, events, host
callbacks) are held per node by the root, so destroying a node releases them and
an executable graph keeps what it was instantiated with.  Each node's attachments
are also held by a CUDA user object that the node's graph owns
(`ironaccel_cuda._core.graph_attach`): the driver hands it on to clones made
through the raw handle, to executable graphs and to embedded copies, and drops it
only when the last of them is destroyed and done running.  So what a node uses
(a Buffer's memory too, see `_memory/_buffer.py`) outlives every Python object
as long as the driver can still run the node.
"""

from __future__ import annotations

import weakref
from typing import Any

from .. import _ia
from .._memory._buffer import claims
from .._utils.cuda_utils import driver, from_ironaccel, guarded
from ._graph_builder import GraphCompleteOptions, GraphDebugPrintOptions

__all__ = ["GraphCondition", "GraphDefinition"]

_new = object.__new__
_INSTANTIATE_FLAGS = (("auto_free_on_launch", 1), ("device_launch", 4), ("use_node_priority", 8))


class _Root:
    """What the graphs of one hierarchy share: the owning ironaccel Graph, the nodes' attachments (by node
    handle) and the body graphs of its child and conditional nodes (by node handle)."""

    __slots__ = ("ia", "attachments", "subgraphs", "owners", "__weakref__")

    def __init__(self, ia: Any):
        self.ia = ia
        self.attachments: dict[int, list[Any]] = {}
        self.subgraphs: dict[int, list[int]] = {}
        self.owners: dict[int, tuple[int, int]] = {}  # node -> (its graph, the user object holding its list)

    def attach(self, graph_h: int, node_h: int, *objects: Any) -> None:
        """Node `node_h` of graph `graph_h` uses `objects`: hold them (and the memory of Buffers among them)
        here and through a user object of the graph."""
        if not objects:
            return
        held = self.attachments.get(node_h)
        if held is None:
            held = self.attachments[node_h] = []
            try:
                user_object = _ia._core.graph_attach(graph_h, held)
            except _ia.DriverError as exc:
                raise from_ironaccel(exc) from None
            if user_object:
                self.owners[node_h] = (graph_h, user_object)
        held.extend(claims(objects))

    def adopt(self, graph_h: int, node_h: int, source: _Root, original_h: int) -> None:
        """Node `node_h` of graph `graph_h` is the driver's copy (in an embedded clone) of node `original_h` of
        `source`: it uses the same attachments, and its graph got its own reference to their user object from
        the driver, which destroying the copy gives back."""
        held = source.attachments.get(original_h)
        if not held:
            return
        self.attachments.setdefault(node_h, []).extend(held)
        owner = source.owners.get(original_h)
        if owner is not None:
            self.owners[node_h] = (graph_h, owner[1])

    def release(self, node_h: int, *, graph_alive: bool) -> None:
        """Node `node_h` is gone or has new attachments: let go of the old ones (`graph_alive`: its graph
        still exists, so its reference to the user object is given back; else the driver dropped it)."""
        self.attachments.pop(node_h, None)
        owner = self.owners.pop(node_h, None)
        if owner is not None and graph_alive:
            try:
                _ia._core.graph_detach(*owner)
            except _ia.DriverError as exc:
                raise from_ironaccel(exc) from None

    def held(self) -> list[Any]:
        """Everything the hierarchy's nodes use, with what ironaccel's Graph holds itself (a captured graph's)."""
        own = [obj for objs in self.attachments.values() for obj in objs]
        return own + list(getattr(self.ia, "_keep", ())) + list(getattr(self.ia, "_host_funcs", ()))

    def held_in(self, graph_h: int) -> list[Any]:
        """The attachments of the nodes of graph `graph_h` and of the graphs inside it."""
        nodes, _ = self.contents(graph_h)
        return [obj for n in nodes for obj in self.attachments.get(n, ())]

    def contents(self, graph_h: int) -> tuple[list[int], list[int]]:
        """(every node, every graph) inside graph `graph_h`, through child and conditional nodes."""
        nodes: list[int] = []
        graphs: list[int] = []
        for n in _graph_nodes(graph_h, self.ia.device):
            nodes.append(n)
            for sub in self.subgraphs.get(n, ()):
                graphs.append(sub)
                more_nodes, more_graphs = self.contents(sub)
                nodes.extend(more_nodes)
                graphs.extend(more_graphs)
        return nodes, graphs


def _graph_nodes(graph_h: int, device: Any) -> list[int]:
    return [n.node_handle for n in graph_nodes(graph_h, device)]


def graph_nodes(graph_h: int, device: Any) -> list[Any]:
    """The ironaccel GraphNodes of graph `graph_h` (its kinds, child graphs, parameters read through them)."""
    return guarded(lambda: _ia.IaGraph.from_handle(graph_h, device).nodes())


_definitions: weakref.WeakValueDictionary[int, GraphDefinition] = weakref.WeakValueDictionary()


class GraphCondition:
    """A condition of conditional nodes (a CUgraphConditionalHandle); pass it to a kernel to set it."""

    __slots__ = ("_handle", "_graph_h", "__weakref__")
    _handle: int
    _graph_h: int

    def __init__(self) -> None:
        raise RuntimeError("GraphCondition objects are made by GraphDefinition.create_condition()")

    @staticmethod
    def _init(handle: int, graph_h: int) -> GraphCondition:
        self = _new(GraphCondition)
        self._handle = int(handle)
        self._graph_h = int(graph_h)
        return self

    @property
    def handle(self) -> Any:
        return driver.CUgraphConditionalHandle(self._handle)

    def __int__(self) -> int:
        return self._handle

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GraphCondition):
            return NotImplemented
        return self._handle == other._handle and self._graph_h == other._graph_h

    def __hash__(self) -> int:
        return hash((GraphCondition, self._handle, self._graph_h))

    def __repr__(self) -> str:
        return f"<GraphCondition handle={self._handle:#x}>"


class GraphDefinition:
    """A graph built node by node: add nodes here (entry points) or on other nodes, then `instantiate()`."""

    __slots__ = ("_h", "_id", "_root", "_view_of", "_entry_node", "_ia", "__weakref__")
    _h: int
    _id: int
    _root: _Root
    _view_of: Any  # the node (or parent definition) a view keeps alive; None for a root
    _entry_node: Any

    def __init__(self) -> None:
        from .._device import Device

        try:
            ia = _ia.IaGraph(Device())
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        self._setup(int(ia._h), _Root(ia), None)

    def _setup(self, h: int, root: _Root, view_of: Any) -> None:
        self._h = self._id = h
        _definitions[h] = self
        self._root = root
        self._view_of = view_of
        self._entry_node = None
        self._ia = None

    def _ia_graph(self) -> Any:
        """This definition's ironaccel Graph: the root's own, or a borrowed one over a child or branch graph."""
        h = self._check()
        if h == int(self._root.ia._h):
            return self._root.ia
        if self._ia is None or self._ia._h is _ia.CLOSED or self._ia.handle != h:
            self._ia = guarded(_ia.IaGraph.from_handle, h, self._device)
        return self._ia

    @classmethod
    def _from_graph(cls, graph: Any, root: _Root | None = None) -> GraphDefinition:
        """A definition that owns an ironaccel `Graph` (a captured one, say), or views a raw CUgraph of one;
        `root`: the attachments its nodes already have (a builder's captured nodes), else none."""
        if not isinstance(graph, _ia.IaGraph):
            raise TypeError(f"expected an ironaccel Graph, got {type(graph).__name__}")
        self = _new(cls)
        self._setup(int(graph._h), root if root is not None else _Root(graph), None)
        return self

    @classmethod
    def _view(cls, h: int, root: _Root, view_of: Any) -> GraphDefinition:
        known = _definitions.get(int(h))
        if known is not None and known._h == int(h) and known._root is root:
            return known
        self = _new(cls)
        self._setup(int(h), root, view_of)
        return self

    # -- identity -------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GraphDefinition):
            return NotImplemented
        return self._id == other._id

    def __hash__(self) -> int:
        return hash((GraphDefinition, self._id))

    def __repr__(self) -> str:
        return f"<GraphDefinition handle={self._h:#x}>"

    @property
    def is_valid(self) -> bool:
        return self._h != 0 and self._root.ia._h is not _ia.CLOSED

    def _check(self) -> int:
        if not self.is_valid:
            raise RuntimeError("the graph definition is no longer valid")
        return self._h

    @property
    def handle(self) -> Any:
        return driver.CUgraph(self._h)

    @property
    def _device(self) -> Any:
        return self._root.ia.device

    @property
    def _entry(self) -> Any:
        from ._graph_node import GraphNode

        if self._entry_node is None:
            self._entry_node = GraphNode._make_entry(self)
        return self._entry_node

    # -- entry-point nodes ------------------------------------------------------------

    def allocate(self, size: int, *, device: Any = None, memory_type: Any = "device",
                 peer_access: Any = None) -> Any:
        return self._entry.allocate(size, device=device, memory_type=memory_type, peer_access=peer_access)

    def deallocate(self, dptr: int) -> Any:
        return self._entry.deallocate(dptr)

    def memset(self, dst: Any, value: Any, width: int, height: int = 1, pitch: int = 0, *,
               dst_owner: Any = None) -> Any:
        return self._entry.memset(dst, value, width, height, pitch, dst_owner=dst_owner)

    def launch(self, config: Any, kernel: Any, *args: Any) -> Any:
        return self._entry.launch(config, kernel, *args)

    def empty(self) -> Any:
        return self._entry.join()

    def join(self, *nodes: Any) -> Any:
        return self._entry.join(*nodes)

    def memcpy(self, dst: Any, src: Any, size: int, *, dst_owner: Any = None, src_owner: Any = None) -> Any:
        return self._entry.memcpy(dst, src, size, dst_owner=dst_owner, src_owner=src_owner)

    def embed(self, child: GraphDefinition) -> Any:
        return self._entry.embed(child)

    def record(self, event: Any) -> Any:
        return self._entry.record(event)

    def wait(self, event: Any) -> Any:
        return self._entry.wait(event)

    def callback(self, fn: Any, *, user_data: Any = None) -> Any:
        return self._entry.callback(fn, user_data=user_data)

    def if_then(self, condition: GraphCondition) -> Any:
        return self._entry.if_then(condition)

    def if_else(self, condition: GraphCondition) -> Any:
        return self._entry.if_else(condition)

    def while_loop(self, condition: GraphCondition) -> Any:
        return self._entry.while_loop(condition)

    def switch(self, condition: GraphCondition, count: int) -> Any:
        return self._entry.switch(condition, count)

    def create_condition(self, default_value: int | None = None) -> GraphCondition:
        """A condition for this graph's conditional nodes (cuGraphConditionalHandleCreate)."""
        if default_value is not None and (isinstance(default_value, bool) or not isinstance(default_value, int)):
            raise TypeError(f"default_value must be an int or None, got {type(default_value).__name__}")
        handle = guarded(self._ia_graph().create_condition, default_value)
        return GraphCondition._init(handle, self._root_h())

    def _root_h(self) -> int:
        return int(self._root.ia._h)

    # -- whole graph ------------------------------------------------------------------

    def instantiate(self, options: GraphCompleteOptions | None = None) -> Any:
        """An executable Graph of this definition (cuGraphInstantiateWithFlags)."""
        from ._graph_builder import Graph

        if options is not None and not isinstance(options, GraphCompleteOptions):
            raise TypeError(f"options must be a GraphCompleteOptions, got {type(options).__name__}")
        h = self._check()
        held = self._root.held_in(h) if self._view_of is not None else [
            obj for objs in self._root.attachments.values() for obj in objs]  # the root Graph adds its own
        flags = {name: bool(getattr(options, name)) for name, _ in _INSTANTIATE_FLAGS} if options is not None else {}
        ia = self._ia_graph()
        exe = guarded(lambda: ia.instantiate(keep=held, **flags))  # what the executable alone is given later too
        graph = Graph._init(exe)
        if options is not None and options.upload_stream is not None:
            graph.upload(options.upload_stream)
        return graph

    def debug_dot_print(self, path: str, options: GraphDebugPrintOptions | None = None) -> None:
        """Write the graph in Graphviz DOT form to `path` (cuGraphDebugDotPrint)."""
        if options is not None and not isinstance(options, GraphDebugPrintOptions):
            raise TypeError(f"options must be a GraphDebugPrintOptions, got {type(options).__name__}")
        flags = options._to_flags() if options is not None else 0
        ia = self._ia_graph()
        guarded(lambda: ia.dot(flags=flags, path=str(path)))

    def nodes(self) -> set[Any]:
        from ._graph_node import _wrap

        return {_wrap(n.node_handle, self, n.kind) for n in guarded(self._ia_graph().nodes)}

    def edges(self) -> set[tuple[Any, Any]]:
        from ._graph_node import _wrap

        return {(_wrap(a.node_handle, self, a.kind), _wrap(b.node_handle, self, b.kind))
                for a, b in guarded(self._ia_graph().edges)}
