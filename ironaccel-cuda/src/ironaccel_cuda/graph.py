"""CUDA graphs: capture a stream's work, or build a graph node by node; replay it cheaply.

    s.begin_capture(); ...work on s...; graph = s.end_capture()        # captured

    g = cu.Graph(dev)                                                  # built
    a = g.add_memset(buf, 0)
    k = g.add_kernel(fn, grid, block, buf, n, after=[a])
    g.add_host_func(lambda: print("done"), after=[k])
    loop = g.add_conditional("while", default=1)                      # loop.body is a Graph
    loop.body.add_kernel(step, 1, 1, loop.handle, counter)            # the kernel sets the condition

    exe = g.instantiate(); exe.upload(s); exe.launch(s)
    exe.set_params(k, fn, grid, block, other_buf, n)                   # same arguments as add_kernel
    exe.update(graph2)                                                 # a whole graph of the same shape
    print(g.dot())                                                     # Graphviz text, for debugging

    print([n.kind for n in g.nodes()], k.params().grid)                # what a graph holds, read back
    exe.set_enabled(k, False)                                          # skip one node in later launches

Node kinds: kernel, memcpy (device buffers and host arrays; host arrays must
stay alive and in place while the graph can run), memset, host function
(`hostfn`), event record and wait, child graph (copied in), memory alloc and
free (`g.add_alloc(...).buffer` is valid between its alloc and free nodes of
one launch), and conditional "if" / "while" nodes whose body runs while a
kernel's `cudaGraphSetConditional(handle, value)` says so.  That device
function lives in the device runtime: compile the kernel with
`CompileOptions(relocatable_device_code=True)` and link it with
`Linker(code, device_runtime=True)`.  A graph holds the Python objects its
nodes use (buffers, events, host functions, child graphs) until it is closed;
an executable graph holds them too, through the driver (a CUDA user object)
as well, so closing it while a launch is still running keeps them until that
launch is done.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from . import _core
from . import dtypes as _dtypes
from ._core import CLOSED
from ._devices import open_device
from ._driver import call, driver, try_call
from .errors import closed, driver_error, invalid
from .event import Event
from .hostfn import _entry, exec_set_host_node, graph_add_node, retarget
from .launch import pack_error
from .memory import DeviceBuf, adopt
from .module import Function, _count, _dim3

if TYPE_CHECKING:
    from .device import Device
    from .stream import Stream

__all__ = ["Graph", "GraphExec", "GraphNode", "ConditionalNode", "AllocNode", "ChildNode", "KernelNodeParams",
           "MemcpyNodeParams", "MemsetNodeParams", "HostNodeParams", "AllocNodeParams", "FreeNodeParams"]

#: A node's kind by its CUgraphNodeType value (a kind this table lacks reads as "other").
_KINDS = {0: "kernel", 1: "memcpy", 2: "memset", 3: "host", 4: "child", 5: "empty", 6: "event_wait",
          7: "event_record", 8: "ext_semaphore_signal", 9: "ext_semaphore_wait", 10: "alloc", 11: "free",
          12: "batch_mem_op", 13: "conditional", 14: "memcpy_batch"}


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
        if h is not CLOSED and self._owns():
            call(self._destroy, h)

    def _owns(self) -> bool:
        return True

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


class GraphNode:
    """A node of a Graph: `kind` says which; pass it in `after=` to order other nodes after it.

    Nodes made by `Graph.add_*` and nodes read back from a graph (`Graph.nodes`,
    `Graph.edges`, `Graph.node`) compare equal when they are the same driver
    node.  `kind` is one of "kernel", "memcpy", "memset", "host", "child",
    "empty", "event_record", "event_wait", "alloc", "free", "if" / "while"
    (made here) or "conditional" (read back), and a few the driver has beyond
    those ("batch_mem_op", ...).
    """

    __slots__ = ("_h", "_id", "graph", "kind")

    def __init__(self, h: Any, graph: Graph, kind: str):
        self._h = h
        self._id = int(h)
        self.graph = graph
        self.kind = kind

    def __repr__(self) -> str:
        return f"<GraphNode {self.kind}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GraphNode):
            return NotImplemented
        return self._id == other._id

    def __hash__(self) -> int:
        return hash((GraphNode, self._id))

    @property
    def node_handle(self) -> int:
        """The CUgraphNode address, for code that talks to the driver itself (a ConditionalNode's `handle` is its
        condition's)."""
        self._live("GraphNode.node_handle")
        return self._id

    @property
    def destroyed(self) -> bool:
        """Whether `destroy()` removed this node."""
        return self._h is CLOSED

    def _live(self, op: str) -> Any:
        if self._h is CLOSED:
            raise closed(op, "graph node (destroyed)")
        self.graph._check(op)  # a closed graph's node handles are freed with it: never hand one to the driver
        return self._h

    def destroy(self) -> None:
        """Remove this node and its edges from its graph (cuGraphDestroyNode); a child or conditional node takes
        its body graphs with it.  Idempotent.  Executable graphs made before keep their copy."""
        op = "cuGraphDestroyNode"
        if self._h is CLOSED:
            return
        h = self._live(op)
        call(op, h)
        self._h = CLOSED

    def params(self) -> Any:
        """This node's parameters as the driver holds them now: a `KernelNodeParams`, `MemcpyNodeParams`,
        `MemsetNodeParams`, `HostNodeParams`, `AllocNodeParams` or `FreeNodeParams` by `kind`
        (cuGraph*NodeGetParams).  Other kinds have none to read (InvalidArgument)."""
        op = f"GraphNode.params({self.kind})"
        h = self._live(op)
        reader = _READERS.get(_base_kind(self.kind))
        if reader is None:
            raise invalid(op, f"a {self.kind} node has no parameters to read")
        return reader(h)


class AllocNode(GraphNode):
    """A memory-allocation node; `buffer` is the DeviceBuf it allocates (valid while the graph runs it)."""

    __slots__ = ("buffer",)
    buffer: Any


class ChildNode(GraphNode):
    """A child-graph node; `child` is the copy of the graph it runs (a Graph that belongs to this node's graph:
    nodes added to it change what this node runs, and it goes when the node or its graph does)."""

    __slots__ = ("_child",)

    def __init__(self, h: Any, graph: Graph, kind: str):
        super().__init__(h, graph, kind)
        self._child: Graph | None = None

    @property
    def child(self) -> Graph:
        """The graph this node runs (cuGraphChildGraphNodeGetGraph)."""
        op = "cuGraphChildGraphNodeGetGraph"
        h = self._live(op)
        if self._child is None or self._child._h is CLOSED:
            self._child = Graph._make(call(op, h), self.graph.device, parent=self.graph)
        return self._child

    def destroy(self) -> None:
        GraphNode.destroy(self)
        if self._child is not None:
            self._child._h = CLOSED


class ConditionalNode(GraphNode):
    """An "if", "while" or "switch" node: `bodies` (Graphs) run as the condition says; `body` is the first.

    An "if" node runs `bodies[0]` when the condition is non-zero and, given an
    else branch (`branches=2`), `bodies[1]` when it is zero; a "while" node runs
    `body` again while it is non-zero; a "switch" node runs `bodies[value]`
    (none when the value is past the end).  `handle` is the condition's
    handle, an int to pass to a kernel as an `unsigned long long`
    (`cudaGraphConditionalHandle`); the kernel calls
    `cudaGraphSetConditional(handle, value)`.
    """

    __slots__ = ("bodies", "handle")
    bodies: tuple[Graph, ...]
    handle: int

    @property
    def body(self) -> Graph:
        """The first (for "while" and a plain "if", the only) body graph."""
        return self.bodies[0]

    def destroy(self) -> None:
        GraphNode.destroy(self)
        for body in getattr(self, "bodies", ()):
            body._h = CLOSED


def _base_kind(kind: str) -> str:
    return "conditional" if kind in ("if", "while", "switch") else kind


def _node_class(kind: str) -> type:
    return {"alloc": AllocNode, "child": ChildNode}.get(kind, GraphNode)


def _deps(graph: Graph, after: Any, op: str) -> list[Any]:
    if isinstance(after, GraphNode):
        after = [after]
    try:
        nodes = list(after)
    except TypeError:
        raise invalid(op, f"after must be a GraphNode or a sequence of them, got {type(after).__name__}") from None
    for node in nodes:
        if not isinstance(node, GraphNode):
            raise invalid(op, f"after must hold GraphNodes, got {type(node).__name__}")
        if node._h is CLOSED:
            raise closed(op, "graph node (destroyed)")
        if node.graph is not graph and node.graph._id != graph._id:
            raise invalid(op, "a dependency must be a node of the same graph")
    return [n._h for n in nodes]


class Graph(_Owned):
    """A graph of work on one device: `Graph(dev)` for an empty one to build, or `Stream.end_capture()`.

    `close()` destroys it (idempotent); instantiated copies stay valid.
    """

    _destroy = "cuGraphDestroy"

    def __init__(self, device: Device):
        device = open_device(device, "cuGraphCreate")
        self._setup(call("cuGraphCreate", 0), device, None)

    @classmethod
    def _make(cls, h: Any, device: Device, parent: Graph | None = None, *, body: bool = False) -> Graph:
        g = object.__new__(cls)
        g._setup(h, device, parent)
        g._body = body
        return g

    def _setup(self, h: Any, device: Device, parent: Graph | None) -> None:
        self._h = h
        self._id = int(h)
        self.device = device
        self._parent = parent  # a child's or a conditional body's graph belongs to its parent, which destroys it
        self._body = False  # a conditional body: instantiated only with the graph that holds it
        self._borrowed = False  # Graph.from_handle: never destroyed here
        self._keep: list[Any] = parent._keep if parent is not None else []
        self._host_funcs: list[Any] = parent._host_funcs if parent is not None else []

    def _owns(self) -> bool:
        return self._parent is None and not self._borrowed

    @classmethod
    def from_handle(cls, handle: int | Any, device: Device) -> Graph:
        """A non-owning Graph over a foreign `CUgraph` (an int address, or a handle object `int()` takes).

        `device` is the device its work runs on; closing the wrapper never
        destroys the graph.  What nodes added through the wrapper use
        (buffers, host functions) is held by the wrapper and by the executable
        graphs instantiated from it, not by the graph's owner.
        """
        op = "Graph.from_handle"
        try:
            h = int(handle)
        except (TypeError, ValueError):
            raise invalid(op, f"expected a CUgraph address (int), got {type(handle).__name__}") from None
        if isinstance(handle, bool) or not 0 < h < 1 << 64:
            raise invalid(op, f"expected a CUgraph address (int), got {handle!r}")
        device = open_device(device, op)
        g = cls._make(driver().CUgraph(h), device)
        g._borrowed = True
        return g

    @property
    def handle(self) -> int:
        """The CUgraph address, for code that talks to the driver itself."""
        self._check("Graph.handle")
        return self._id

    def _root(self) -> Graph:
        g = self
        while g._parent is not None:
            g = g._parent
        return g

    def _check(self, op: str) -> None:
        if self._h is CLOSED or (self._parent is not None and self._root()._h is CLOSED):
            raise closed(op, "graph")

    @property
    def node_count(self) -> int:
        """How many nodes this graph has (cuGraphGetNodes); a child graph node counts as one."""
        self._check("cuGraphGetNodes")
        _, count = call("cuGraphGetNodes", self._h, 0)
        return int(count)

    def nodes(self) -> list[GraphNode]:
        """Every node of this graph (cuGraphGetNodes), in the driver's order; nodes inside child graphs and
        conditional bodies are their graphs' (`ChildNode.child`, `ConditionalNode.bodies`)."""
        op = "cuGraphGetNodes"
        self._check(op)
        _, count = call(op, self._h, 0)
        if not count:
            return []
        handles, count = call(op, self._h, count)
        return [self._wrap(h) for h in handles[:count]]

    def edges(self) -> list[tuple[GraphNode, GraphNode]]:
        """Every dependency of this graph as (from, to) node pairs: `to` runs after `from` (cuGraphGetEdges)."""
        op = "cuGraphGetEdges"
        self._check(op)
        count = call(op, self._h, 0)[-1]
        if not count:
            return []
        found = call(op, self._h, count)
        count = found[-1]
        return [(self._wrap(a), self._wrap(b)) for a, b in zip(found[0][:count], found[1][:count])]

    def node(self, handle: int | Any) -> GraphNode:
        """The node of this graph at `handle` (a CUgraphNode address, as `GraphNode.node_handle` gives), for nodes
        made by code that talks to the driver itself.  InvalidArgument when this graph has no such node."""
        op = "Graph.node"
        self._check(op)
        try:
            h = int(handle)
        except (TypeError, ValueError):
            raise invalid(op, f"expected a CUgraphNode address (int), got {type(handle).__name__}") from None
        if isinstance(handle, bool) or h not in self._handles():
            raise invalid(op, f"this graph has no node {handle!r}")
        return self._wrap(driver().CUgraphNode(h))

    def _handles(self) -> set[int]:
        _, count = call("cuGraphGetNodes", self._h, 0)
        if not count:
            return set()
        handles, count = call("cuGraphGetNodes", self._h, count)
        return {int(h) for h in handles[:count]}

    def _wrap(self, h: Any) -> GraphNode:
        kind = _KINDS.get(int(call("cuGraphNodeGetType", h)), "other")
        node = self._node(h, kind, _node_class(kind))
        if kind == "alloc":
            p = call("cuGraphMemAllocNodeGetParams", h)
            node.buffer = adopt(int(p.dptr), int(p.bytesize), "uint8", self.device, keepalive=self)
        return node

    def instantiate(self, *, auto_free_on_launch: bool = False, device_launch: bool = False,
                    use_node_priority: bool = False, keep: Any = ()) -> GraphExec:
        """An executable copy of this graph (cuGraphInstantiate).

        `auto_free_on_launch` frees the graph's unfreed allocations before each
        relaunch; `device_launch` makes it launchable from device code;
        `use_node_priority` runs kernels at their nodes' priorities rather
        than the launching stream's (CUDA_GRAPH_INSTANTIATE_FLAG_*).  `keep`:
        more objects the executable holds while it can run, beside what this
        Graph's own nodes use (what nodes made through the driver directly
        use; host functions among them report their failures to the launching
        stream).
        """
        op = "cuGraphInstantiate"
        self._check(op)
        if self._body:
            raise invalid(op, "a conditional node's body is instantiated with the graph that holds it")
        flags = (1 if auto_free_on_launch else 0) | (4 if device_launch else 0) | (8 if use_node_priority else 0)
        extra, extra_funcs = _kept(keep, op)
        self.device._bind_here()
        kept, host_funcs = list(self._keep) + extra, list(self._host_funcs) + extra_funcs
        with _Staged(self._h, (kept, host_funcs)):
            h = call(op, self._h, flags)
        return GraphExec._make(h, self.device, kept, host_funcs)

    # -- building -----------------------------------------------------------

    def _node(self, h: Any, kind: str, cls: type = GraphNode) -> Any:
        return cls(h, self, kind)

    def add_empty(self, after: Any = ()) -> GraphNode:
        """A node that does nothing: a join point for dependencies (cuGraphAddEmptyNode)."""
        op = "cuGraphAddEmptyNode"
        self._check(op)
        deps = _deps(self, after, op)
        return self._node(call(op, self._h, deps, len(deps)), "empty")

    def add_kernel(self, fn: Function, grid: Any, block: Any, *args: Any, shared_mem: int = 0,
                   after: Any = ()) -> GraphNode:
        """A kernel launch, with arguments as `Function.launch` takes them (cuGraphAddKernelNode)."""
        op = "cuGraphAddKernelNode"
        self._check(op)
        deps = _deps(self, after, op)
        params, keep = _kernel_params(self.device, fn, grid, block, args, shared_mem, op)
        self.device._bind_here()
        h = call(op, self._h, deps, len(deps), params)
        self._keep.append(keep)
        return self._node(h, "kernel")

    def add_memcpy(self, dst: Any, src: Any, after: Any = ()) -> GraphNode:
        """A copy between device buffers, or between a device buffer and a host array (cuGraphAddMemcpyNode)."""
        op = "cuGraphAddMemcpyNode"
        self._check(op)
        deps = _deps(self, after, op)
        params, keep = _memcpy_params(self.device, dst, src, op)
        h = call(op, self._h, deps, len(deps), params, self.device._state.ctx)
        self._keep.append(keep)
        return self._node(h, "memcpy")

    def add_memset(self, buf: Any, value: int, after: Any = ()) -> GraphNode:
        """Set every element of `buf` (1, 2 or 4-byte elements) to `value` (cuGraphAddMemsetNode)."""
        op = "cuGraphAddMemsetNode"
        self._check(op)
        deps = _deps(self, after, op)
        params, keep = _memset_params(self.device, buf, value, op)
        h = call(op, self._h, deps, len(deps), params, self.device._state.ctx)
        self._keep.append(keep)
        return self._node(h, "memset")

    def add_host_func(self, fn: Callable[[], Any], after: Any = ()) -> GraphNode:
        """Run `fn()` on a driver thread when the node runs (cuGraphAddHostNode); see `Stream.launch_host_func`."""

        op = "cuGraphAddHostNode"
        self._check(op)
        deps = _deps(self, after, op)
        h, entry = graph_add_node(int(self._h), [int(d) for d in deps], fn, None)
        self._host_funcs.append(entry)
        return self._node(driver().CUgraphNode(h), "host")

    def add_event_record(self, event: Any, after: Any = ()) -> GraphNode:
        """Record `event` when the node runs (cuGraphAddEventRecordNode)."""
        op = "cuGraphAddEventRecordNode"
        self._check(op)
        deps = _deps(self, after, op)
        h = call(op, self._h, deps, len(deps), _event(event, self.device, op))
        self._keep.append(event)
        return self._node(h, "event_record")

    def add_event_wait(self, event: Any, after: Any = ()) -> GraphNode:
        """Wait for `event` (recorded elsewhere) before the nodes after this one (cuGraphAddEventWaitNode)."""
        op = "cuGraphAddEventWaitNode"
        self._check(op)
        deps = _deps(self, after, op)
        h = call(op, self._h, deps, len(deps), _event(event, self.device, op))
        self._keep.append(event)
        return self._node(h, "event_wait")

    def add_child(self, graph: Graph, after: Any = ()) -> ChildNode:
        """Run a copy of `graph` as one node (cuGraphAddChildGraphNode); later changes to `graph` do not reach it
        (the node's `child` is the copy)."""
        op = "cuGraphAddChildGraphNode"
        self._check(op)
        if not isinstance(graph, Graph):
            raise invalid(op, f"expected a Graph, got {type(graph).__name__}")
        graph._check(op)
        if graph._root() is self._root():
            raise invalid(op, "a graph cannot hold itself as a child")
        deps = _deps(self, after, op)
        h = call(op, self._h, deps, len(deps), graph._h)
        self._keep.extend(graph._keep)
        self._host_funcs.extend(graph._host_funcs)
        return self._node(h, "child", ChildNode)

    def add_alloc(self, size: int, dtype: Any = "uint8", after: Any = ()) -> AllocNode:
        """Allocate `size` elements of device memory when the node runs (cuGraphAddMemAllocNode).

        `.buffer` is a DeviceBuf over the allocation, for the nodes after this
        one; free it with `add_free` (or it is freed when a later launch needs
        the address, or by `GraphExec` close).
        """

        op = "cuGraphAddMemAllocNode"
        self._check(op)
        _, npdt, _ = _dtypes.spec(dtype, op)
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise invalid(op, f"size must be a positive int (elements), got {size!r}")
        nbytes = size * npdt.itemsize
        if nbytes > self.device.total_memory:
            raise invalid(op, f"{nbytes} bytes is more than cuda:{self.device.ordinal} has")
        deps = _deps(self, after, op)
        drv = driver()
        params = drv.CUDA_MEM_ALLOC_NODE_PARAMS()
        params.poolProps.allocType = drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        params.poolProps.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        params.poolProps.location.id = self.device.ordinal
        params.bytesize = nbytes
        self.device._bind_here()
        h = call(op, self._h, deps, len(deps), params)
        node = self._node(h, "alloc", AllocNode)
        node.buffer = adopt(int(params.dptr), size, dtype, self.device, keepalive=self)
        return node

    def add_free(self, buf: Any, after: Any = ()) -> GraphNode:
        """Free memory allocated by an alloc node of this graph (its `.buffer`, or the AllocNode)."""
        op = "cuGraphAddMemFreeNode"
        self._check(op)
        if isinstance(buf, AllocNode):
            buf = buf.buffer
        ptr = getattr(buf, "ptr", None)
        if not isinstance(ptr, int):
            raise invalid(op, f"expected an AllocNode or its buffer, got {type(buf).__name__}")
        deps = _deps(self, after, op)
        return self._node(call(op, self._h, deps, len(deps), driver().CUdeviceptr(ptr)), "free")

    def create_condition(self, default: int | None = None) -> int:
        """A condition for a conditional node of this graph (cuGraphConditionalHandleCreate): an int handle to
        give to `add_conditional(..., condition=)` and to the kernels that set it (the driver wants one
        condition per conditional node).

        `default` is its value at the start of every launch; None leaves it
        unset there (it keeps what a kernel last set).
        """
        op = "cuGraphConditionalHandleCreate"
        self._check(op)
        if default is not None and (isinstance(default, bool) or not isinstance(default, int)
                                    or not 0 <= default < 1 << 32):
            raise invalid(op, f"default must be None or an int in [0, 2**32), got {default!r}")
        self.device._bind_here()
        handle = call(op, self._h, self.device._state.ctx, default or 0, 0 if default is None else 1)
        return int(handle)  # flags 1: CU_GRAPH_COND_ASSIGN_DEFAULT

    def add_conditional(self, kind: str, default: int = 0, after: Any = (), *, condition: int | None = None,
                        branches: int = 1) -> ConditionalNode:
        """An "if", "while" or "switch" node with empty body graphs to fill (cuGraphAddNode, conditional).

        Its condition is a new one starting each launch at `default`, or
        `condition`, a handle from `create_condition` (then `default` is that
        call's).  `branches`: 1, or 2 for an "if" with an else body, or a
        switch's number of cases.
        """
        op = "cuGraphAddNode"
        self._check(op)
        drv = driver()
        types = {"if": drv.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_IF,
                 "while": drv.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_WHILE,
                 "switch": drv.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_SWITCH}
        if not isinstance(kind, str) or kind not in types:
            raise invalid(op, f"kind must be 'if', 'while' or 'switch', got {kind!r}")
        if isinstance(default, bool) or not isinstance(default, int) or not 0 <= default < 1 << 32:
            raise invalid(op, f"default must be a non-negative int, got {default!r}")
        most = {"if": 2, "while": 1, "switch": 1 << 16}[kind]
        if isinstance(branches, bool) or not isinstance(branches, int) or not 1 <= branches <= most:
            raise invalid(op, f"branches must be an int in [1, {most}] for a {kind} node, got {branches!r}")
        if condition is not None:
            if isinstance(condition, bool) or not isinstance(condition, int) or not 0 < condition < 1 << 64:
                raise invalid(op, f"condition must be a handle from create_condition (an int), got {condition!r}")
            if default:
                raise invalid(op, "a condition from create_condition has the default given there, not default=")
        deps = _deps(self, after, op)
        handle = self.create_condition(default) if condition is None else condition
        self.device._bind_here()
        params = drv.CUgraphNodeParams()
        params.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
        params.conditional.handle = drv.CUgraphConditionalHandle(handle)
        params.conditional.type = types[kind]
        params.conditional.size = branches
        params.conditional.ctx = self.device._state.ctx
        # The driver is called here, not through `call`: `params` must never be a Python frame's argument, since
        # a traceback that prints arguments would read phGraph_out, which the driver sets only on success.
        try:
            err, h = drv.cuGraphAddNode(self._h, deps, None, len(deps), params)
        except TypeError:  # a binding of the CUDA 12.2 API: no edge data
            err, h = drv.cuGraphAddNode(self._h, deps, len(deps), params)
        if err:
            raise driver_error(err, op)
        node = self._node(h, kind, ConditionalNode)
        node.handle = int(handle)
        out = params.conditional.phGraph_out
        node.bodies = tuple(Graph._make(out[i], self.device, parent=self, body=True) for i in range(branches))
        return node

    # -- debugging ------------------------------------------------------------

    def dot(self, verbose: bool = False, *, flags: int | None = None, path: str | os.PathLike[str] | None = None
            ) -> str:
        """The graph in Graphviz DOT form (cuGraphDebugDotPrint); `verbose` adds every node's parameters.

        `flags` picks the details instead (CU_GRAPH_DEBUG_DOT_FLAGS_* bits);
        `path` has the driver write the file there (and keeps it), else a
        temporary file is used.
        """
        op = "cuGraphDebugDotPrint"
        self._check(op)
        if flags is None:
            flags = 0xFFFF if verbose else 0
        elif isinstance(flags, bool) or not isinstance(flags, int) or not 0 <= flags < 1 << 32:
            raise invalid(op, f"flags must be an int of CU_GRAPH_DEBUG_DOT_FLAGS_* bits, got {flags!r}")
        if path is not None:
            call(op, self._h, os.fsencode(path), flags)
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        fd, temp = tempfile.mkstemp(suffix=".dot")
        os.close(fd)
        try:
            call(op, self._h, temp.encode(), flags)
            with open(temp, encoding="utf-8", errors="replace") as f:
                return f.read()
        finally:
            os.unlink(temp)


class GraphExec(_Owned):
    """An instantiated graph, ready to launch on any stream of its device."""

    _destroy = "cuGraphExecDestroy"
    device: Device
    _ordinal: int
    _default: Any
    _keep: list[Any]
    _host_funcs: list[Any]

    def __init__(self) -> None:
        raise TypeError("make executable graphs with Graph.instantiate()")

    @classmethod
    def _make(cls, h: Any, device: Device, keep: list[Any] | None = None,
              host_funcs: list[Any] | None = None) -> GraphExec:
        e = object.__new__(_HostFuncGraphExec if host_funcs else cls)
        e._h = int(h)
        e.device = device
        e._ordinal = device.ordinal
        e._default = device._state.default_stream
        e._keep = keep if keep is not None else []  # the very lists a staged user object holds (see _Staged)
        e._host_funcs = host_funcs if host_funcs is not None else []
        return e

    def upload(self, stream: Stream | None = None) -> None:
        """Prepare the graph's work on the device ahead of its first launch (cuGraphUpload), in stream order."""
        op = "cuGraphUpload"
        if self._h is CLOSED:
            raise closed(op, "executable graph")
        s = self._stream(stream, op)
        call(op, self._h, s._h)

    def _stream(self, stream: Any, op: str) -> Any:
        s = self._default if stream is None else stream
        if not isinstance(s, _core.StreamCore):
            raise invalid(op, f"stream must be a Stream, got {type(s).__name__}")
        if s._h is CLOSED:
            raise closed(op, "stream")
        if s._ordinal != self._ordinal:
            raise invalid(op, f"the stream is on cuda:{s._ordinal}, the graph on cuda:{self._ordinal}")
        return s

    def _exec_node(self, node: Any, op: str) -> Any:
        if self._h is CLOSED:
            raise closed(op, "executable graph")
        if not isinstance(node, GraphNode):
            raise invalid(op, f"expected a GraphNode, got {type(node).__name__}")
        return node._live(op)

    def is_enabled(self, node: GraphNode) -> bool:
        """Whether `node` (of the graph this was instantiated from) runs in this executable's launches
        (cuGraphNodeGetEnabled)."""
        op = "cuGraphNodeGetEnabled"
        h = self._exec_node(node, op)
        return bool(call(op, self._h, h))

    def set_enabled(self, node: GraphNode, enabled: bool) -> None:
        """Turn `node` off (its work is skipped; its dependencies still order the rest) or back on, for this
        executable's later launches (cuGraphNodeSetEnabled): kernel, memcpy and memset nodes."""
        op = "cuGraphNodeSetEnabled"
        h = self._exec_node(node, op)
        if not isinstance(enabled, (bool, np.bool_)):
            raise invalid(op, f"enabled must be a bool, got {type(enabled).__name__}")
        call(op, self._h, h, 1 if enabled else 0)

    def set_params(self, node: GraphNode, *args: Any, **kwargs: Any) -> None:
        """Give one node of this executable graph new parameters: the arguments of the `Graph.add_*` call that
        made it, without `after` (cuGraphExec*NodeSetParams).  The node keeps its kind and place."""
        kind = getattr(node, "kind", None)
        op = f"GraphExec.set_params({kind})"
        if self._h is CLOSED:
            raise closed(op, "executable graph")
        if not isinstance(node, GraphNode):
            raise invalid(op, f"expected a GraphNode, got {type(node).__name__}")
        node._live(op)
        setter = getattr(self, f"_set_{kind}", None)
        if setter is None:
            raise invalid(op, f"a {kind} node's parameters cannot be changed in an executable graph")
        try:
            setter(node, *args, **kwargs)
        except TypeError as exc:
            raise invalid(op, f"bad arguments for a {kind} node: {exc}") from None

    def _set_kernel(self, node: GraphNode, fn: Function, grid: Any, block: Any, *args: Any,
                    shared_mem: int = 0) -> None:
        op = "cuGraphExecKernelNodeSetParams"
        params, keep = _kernel_params(self.device, fn, grid, block, args, shared_mem, op)
        call(op, self._h, node._h, params)
        self._keep.append(keep)

    def _set_memcpy(self, node: GraphNode, dst: Any, src: Any) -> None:
        op = "cuGraphExecMemcpyNodeSetParams"
        params, keep = _memcpy_params(self.device, dst, src, op)
        call(op, self._h, node._h, params, self.device._state.ctx)
        self._keep.append(keep)

    def _set_memset(self, node: GraphNode, buf: Any, value: int) -> None:
        op = "cuGraphExecMemsetNodeSetParams"
        params, keep = _memset_params(self.device, buf, value, op)
        call(op, self._h, node._h, params, self.device._state.ctx)
        self._keep.append(keep)

    def _set_host(self, node: GraphNode, fn: Callable[[], Any]) -> None:
        self._hold([], [exec_set_host_node(int(self._h), int(node._h), fn, None)])

    def _set_event_record(self, node: GraphNode, event: Any) -> None:
        op = "cuGraphExecEventRecordNodeSetEvent"
        call(op, self._h, node._h, _event(event, self.device, op))
        self._keep.append(event)

    def _set_event_wait(self, node: GraphNode, event: Any) -> None:
        op = "cuGraphExecEventWaitNodeSetEvent"
        call(op, self._h, node._h, _event(event, self.device, op))
        self._keep.append(event)

    def _set_child(self, node: GraphNode, graph: Graph) -> None:
        op = "cuGraphExecChildGraphNodeSetParams"
        if not isinstance(graph, Graph):
            raise invalid(op, f"expected a Graph, got {type(graph).__name__}")
        graph._check(op)
        call(op, self._h, node._h, graph._h)
        self._hold(graph._keep, graph._host_funcs)

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

    def update(self, graph: Graph, *, keep: Any = ()) -> None:
        """Take the parameters of `graph` (a re-capture with the same topology) without re-instantiating.

        From then on this executable holds what `graph` holds (buffers, host
        functions, and `keep` as `Graph.instantiate` takes it) instead of what
        it held before; a rejected update changes nothing and raises a
        DriverError whose `update_result` says why ("topology_changed",
        "node_type_changed", "function_changed", "parameters_changed",
        "not_supported", "unsupported_function_change", "attributes_changed",
        or "error"; cuGraphExecUpdate's CUgraphExecUpdateResult).
        """
        op = "cuGraphExecUpdate"
        if self._h is CLOSED:
            raise closed(op, "executable graph")
        if not isinstance(graph, Graph):
            raise invalid(op, f"expected a Graph, got {type(graph).__name__}")
        graph._check(op)  # a conditional body's handle goes with its parent graph
        extra, extra_funcs = _kept(keep, op)
        self.device._bind_here()
        kept, host_funcs = list(graph._keep) + extra, list(graph._host_funcs) + extra_funcs
        with _Staged(graph._h, (kept, host_funcs)):
            err, info = try_call(op, self._h, graph._h)
        if err:
            result = getattr(getattr(info, "result", None), "name", None) or _update_result(self._h, graph._h)
            exc = driver_error(err, op, f"update result {result}; re-instantiate instead" if result else None)
            exc.update_result = _short_result(result)  # type: ignore[attr-defined]
            raise exc
        self._adopt(kept, host_funcs)

    def _adopt(self, keep: list[Any], host_funcs: list[Any]) -> None:
        """After a whole-graph update: hold these lists (the ones a staged user object holds, see `_Staged`)."""
        self._keep, self._host_funcs = keep, host_funcs
        if host_funcs and self.__class__ is GraphExec:
            self.__class__ = _HostFuncGraphExec

    def _hold(self, keep: list[Any], host_funcs: list[Any]) -> None:
        """Keep what new node parameters use; with host functions, launches report their failures from now on."""
        self._keep.extend(keep)
        if host_funcs:
            self._host_funcs.extend(host_funcs)
            if self.__class__ is GraphExec:
                self.__class__ = _HostFuncGraphExec


class _Staged:
    """Hold `owner` (the executable's `(keep, host_funcs)` lists) through a CUDA user object of the graph `graph_h`
    across one instantiation or whole-graph update: the driver gives the executable graph its own reference,
    which it drops only once the executable is destroyed and its launches have finished, so closing an executable
    graph that is still running keeps what it uses (its buffers, host functions) until then.  The graph's own
    reference goes when the block ends.  Those lists are the GraphExec's own, so what later parameter changes
    in the executable alone add to them (`set_params`, `_hold`) is held the same way."""

    __slots__ = ("graph_h", "owner", "user_object")

    def __init__(self, graph_h: Any, owner: Any):
        self.graph_h, self.owner, self.user_object = int(graph_h), owner, 0

    def __enter__(self) -> None:
        self.user_object = _core.graph_attach(self.graph_h, self.owner)

    def __exit__(self, *exc: object) -> None:
        if self.user_object:
            _core.graph_detach(self.graph_h, self.user_object)


def _short_result(name: str | None) -> str | None:
    """"topology_changed" for CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED ("error" for the bare one)."""
    if not name or not name.startswith("CU_GRAPH_EXEC_UPDATE_ERROR"):
        return None
    return name[len("CU_GRAPH_EXEC_UPDATE_ERROR_"):].lower() or "error"


def _kept(keep: Any, op: str) -> tuple[list[Any], list[Any]]:
    """(the objects of `keep`, the host functions among them)."""
    from .hostfn import HostFunc

    if isinstance(keep, (str, bytes)):
        raise invalid(op, f"keep must be a sequence of objects, got {type(keep).__name__}")
    try:
        objects = list(keep)
    except TypeError:
        raise invalid(op, f"keep must be a sequence of objects, got {type(keep).__name__}") from None
    return objects, [obj for obj in objects if isinstance(obj, HostFunc)]


class _UpdateResultInfo(ctypes.Structure):
    _fields_ = [("result", ctypes.c_int), ("errorNode", ctypes.c_void_p), ("errorFromNode", ctypes.c_void_p)]


def _update_result(exec_h: Any, graph_h: Any) -> str | None:
    """Why cuGraphExecUpdate refuses `graph_h` (a CU_GRAPH_EXEC_UPDATE_* name), asked through the driver's entry
    point: the binding returns no result info when the call fails.  A refused update changes nothing, so asking
    again is harmless."""

    update = _entry("cuGraphExecUpdate", ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(_UpdateResultInfo))
    info = _UpdateResultInfo()
    if not update(int(exec_h), int(graph_h), ctypes.byref(info)):
        return None
    try:
        return str(driver().CUgraphExecUpdateResult(info.result).name)
    except ValueError:
        return None


class _HostFuncGraphExec(GraphExec):
    """A GraphExec with host functions: each launch sends their failures to the launching stream."""

    def launch(self, stream: Stream | None = None) -> None:
        s = self._default if stream is None else stream
        if getattr(s, "_h", CLOSED) is not CLOSED and self._h is not CLOSED:
            retarget(self._host_funcs, s)
        GraphExec.launch(self, stream)


# -- node parameters (cold) ------------------------------------------------------


class KernelNodeParams(NamedTuple):
    """A kernel node's launch, read back: `function` is the CUfunction (or a library's CUkernel) address."""

    function: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int


class MemcpyNodeParams(NamedTuple):
    """A one-dimensional copy node, read back: `size` bytes from address `src` to `dst` (device or host)."""

    dst: int
    src: int
    size: int


class MemsetNodeParams(NamedTuple):
    """A memset node, read back: `height` rows of `width` elements of `element_size` bytes, `pitch` bytes apart,
    at `ptr`, set to `value`."""

    ptr: int
    value: int
    element_size: int
    width: int
    height: int
    pitch: int


class HostNodeParams(NamedTuple):
    """A host node, read back: the C function's address and the user data it is called with."""

    fn: int
    user_data: int


class AllocNodeParams(NamedTuple):
    """An allocation node, read back: `size` bytes at `ptr`, `memory_type` "device", "host" or "managed" on
    `location` (a device ordinal; 0 for host memory), readable and writable from the devices in `peers` too."""

    ptr: int
    size: int
    memory_type: str
    location: int
    peers: tuple[int, ...]


class FreeNodeParams(NamedTuple):
    """A free node, read back: the address of the graph allocation it frees."""

    ptr: int


def _read_kernel(h: Any) -> KernelNodeParams:
    p = call("cuGraphKernelNodeGetParams", h)
    return KernelNodeParams(int(p.kern) or int(p.func), (int(p.gridDimX), int(p.gridDimY), int(p.gridDimZ)),
                            (int(p.blockDimX), int(p.blockDimY), int(p.blockDimZ)), int(p.sharedMemBytes))


def _read_memcpy(h: Any) -> MemcpyNodeParams:
    p = call("cuGraphMemcpyNodeGetParams", h)
    return MemcpyNodeParams(int(p.dstDevice) or int(p.dstHost or 0), int(p.srcDevice) or int(p.srcHost or 0),
                            int(p.WidthInBytes))


def _read_memset(h: Any) -> MemsetNodeParams:
    p = call("cuGraphMemsetNodeGetParams", h)
    return MemsetNodeParams(int(p.dst), int(p.value), int(p.elementSize), int(p.width), int(p.height), int(p.pitch))


def _read_host(h: Any) -> HostNodeParams:
    p = call("cuGraphHostNodeGetParams", h)
    return HostNodeParams(int(p.fn), int(p.userData or 0))


def _read_alloc(h: Any) -> AllocNodeParams:
    drv = driver()
    p = call("cuGraphMemAllocNodeGetParams", h)
    props = p.poolProps
    if props.allocType == drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_MANAGED:
        kind = "managed"
    elif props.location.type == drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST:
        kind = "host"
    else:
        kind = "device"
    peers = tuple(int(d.location.id) for d in (p.accessDescs or ())[:int(p.accessDescCount)])
    return AllocNodeParams(int(p.dptr), int(p.bytesize), kind, int(props.location.id), peers)


def _read_free(h: Any) -> FreeNodeParams:
    return FreeNodeParams(int(call("cuGraphMemFreeNodeGetParams", h)))


_READERS: dict[str, Callable[[Any], Any]] = {
    "kernel": _read_kernel, "memcpy": _read_memcpy, "memset": _read_memset, "host": _read_host,
    "alloc": _read_alloc, "free": _read_free}


def _kernel_params(device: Device, fn: Any, grid: Any, block: Any, args: tuple[Any, ...], shared_mem: Any,
                   op: str) -> tuple[Any, Any]:
    if not isinstance(fn, Function):
        raise invalid(op, f"expected a Function, got {type(fn).__name__}")
    if fn._h is CLOSED:
        raise closed(op, "function (its module was closed)")
    if fn._ordinal != device.ordinal:
        raise invalid(op, f"{fn.name} is loaded on cuda:{fn._ordinal}, the graph is on cuda:{device.ordinal}")
    g, b = _dim3(grid, "grid", op), _dim3(block, "block", op)
    smem = _count(shared_mem, "shared_mem", op)
    packer = fn._new_packer(args)
    try:
        packer.pack(args)
    except Exception as exc:
        raise pack_error(args, exc, fn.name, packer=packer) from None
    func = fn._h
    if fn._kernel is not None:  # a Library's CUkernel: a kernel node takes the CUfunction it has in this context
        device._bind_here()
        func = call("cuKernelGetFunction", fn._kernel)
    drv = driver()
    params = drv.CUDA_KERNEL_NODE_PARAMS()
    params.func = drv.CUfunction(int(func))
    params.gridDimX, params.gridDimY, params.gridDimZ = g
    params.blockDimX, params.blockDimY, params.blockDimZ = b
    params.sharedMemBytes = smem
    params.kernelParams = packer.params
    return params, (fn, args, packer)


def _host_address(array: Any, op: str, writable: bool) -> tuple[int, int]:
    if not isinstance(array, np.ndarray):
        raise invalid(op, f"expected a DeviceBuf or a numpy array, got {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise invalid(op, "host arrays must be C-contiguous")
    if writable and not array.flags.writeable:
        raise invalid(op, "the destination array is read-only")
    return int(array.ctypes.data), int(array.nbytes)


def _memcpy_params(device: Device, dst: Any, src: Any, op: str) -> tuple[Any, Any]:
    drv = driver()
    params = drv.CUDA_MEMCPY3D()
    kinds = drv.CUmemorytype
    sizes = []
    for side, obj in (("dst", dst), ("src", src)):
        if isinstance(obj, DeviceBuf):
            if obj.closed:
                raise closed(op, f"{side} buffer")
            setattr(params, f"{side}MemoryType", kinds.CU_MEMORYTYPE_DEVICE)
            setattr(params, f"{side}Device", drv.CUdeviceptr(obj.ptr))
            sizes.append(obj.nbytes)
        else:
            address, nbytes = _host_address(obj, op, side == "dst")
            setattr(params, f"{side}MemoryType", kinds.CU_MEMORYTYPE_HOST)
            setattr(params, f"{side}Host", address)
            sizes.append(nbytes)
    if not isinstance(dst, DeviceBuf) and not isinstance(src, DeviceBuf):
        raise invalid(op, "one side of a graph copy must be a DeviceBuf")
    if sizes[0] != sizes[1]:
        raise invalid(op, f"the copy needs equal sizes: dst {sizes[0]} bytes, src {sizes[1]} bytes")
    if sizes[0] == 0:
        raise invalid(op, "nothing to copy (0 bytes)")
    params.WidthInBytes = sizes[0]
    params.Height = 1
    params.Depth = 1
    return params, (dst, src)


def _memset_params(device: Device, buf: Any, value: Any, op: str) -> tuple[Any, Any]:
    if not isinstance(buf, DeviceBuf):
        raise invalid(op, f"expected a DeviceBuf, got {type(buf).__name__}")
    if buf.closed:
        raise closed(op, "buffer")
    itemsize = buf.nbytes // buf.size if buf.size else 1
    if itemsize not in (1, 2, 4):
        raise invalid(op, f"memset sets 1, 2 or 4-byte elements; {buf.dtype} has {itemsize}")
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= int(value) < 1 << (8 * itemsize):
        raise invalid(op, f"value must be an int that fits {itemsize} bytes, got {value!r}")
    drv = driver()
    params = drv.CUDA_MEMSET_NODE_PARAMS()
    params.dst = drv.CUdeviceptr(buf.ptr)
    params.elementSize = itemsize
    params.width = buf.size
    params.height = 1
    params.pitch = 0
    params.value = int(value)
    return params, buf


def _event(event: Any, device: Device, op: str) -> Any:
    if not isinstance(event, Event):
        raise invalid(op, f"expected an Event, got {type(event).__name__}")
    if event._h is CLOSED:
        raise closed(op, "event")
    if event._ordinal != device.ordinal:
        raise invalid(op, f"the event is on cuda:{event._ordinal}, the graph on cuda:{device.ordinal}")
    return driver().CUevent(int(event._h))



