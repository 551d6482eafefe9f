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
from typing import TYPE_CHECKING, Any

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

__all__ = ["Graph", "GraphExec", "GraphNode", "ConditionalNode", "AllocNode"]


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
    """A node of a built Graph: `kind` says which; pass it in `after=` to order other nodes after it."""

    __slots__ = ("_h", "graph", "kind")

    def __init__(self, h: Any, graph: Graph, kind: str):
        self._h = h
        self.graph = graph
        self.kind = kind

    def __repr__(self) -> str:
        return f"<GraphNode {self.kind}>"


class AllocNode(GraphNode):
    """A memory-allocation node; `buffer` is the DeviceBuf it allocates (valid while the graph runs it)."""

    __slots__ = ("buffer",)
    buffer: Any


class ConditionalNode(GraphNode):
    """An "if" or "while" node: `body` (a Graph) runs when / while the condition is non-zero.

    `handle` is the condition's handle, an int to pass to a kernel as an
    `unsigned long long` (`cudaGraphConditionalHandle`); the kernel calls
    `cudaGraphSetConditional(handle, value)`.  `default` is the value the
    condition takes at the start of each launch of the graph.
    """

    __slots__ = ("body", "handle")
    body: Graph
    handle: int


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
        if node.graph is not graph:
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
    def _make(cls, h: Any, device: Device, parent: Graph | None = None) -> Graph:
        g = object.__new__(cls)
        g._setup(h, device, parent)
        return g

    def _setup(self, h: Any, device: Device, parent: Graph | None) -> None:
        self._h = h
        self.device = device
        self._parent = parent  # a conditional body belongs to its parent graph, which destroys it
        self._keep: list[Any] = parent._keep if parent is not None else []
        self._host_funcs: list[Any] = parent._host_funcs if parent is not None else []

    def _owns(self) -> bool:
        return self._parent is None

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

    def instantiate(self, *, auto_free_on_launch: bool = False, device_launch: bool = False,
                    use_node_priority: bool = False) -> GraphExec:
        """An executable copy of this graph (cuGraphInstantiate).

        `auto_free_on_launch` frees the graph's unfreed allocations before each
        relaunch; `device_launch` makes it launchable from device code;
        `use_node_priority` runs kernels at their nodes' priorities rather
        than the launching stream's (CUDA_GRAPH_INSTANTIATE_FLAG_*).
        """
        op = "cuGraphInstantiate"
        self._check(op)
        if self._parent is not None:
            raise invalid(op, "a conditional node's body is instantiated with the graph that holds it")
        flags = (1 if auto_free_on_launch else 0) | (4 if device_launch else 0) | (8 if use_node_priority else 0)
        self.device._bind_here()
        keep, host_funcs = list(self._keep), list(self._host_funcs)
        with _Staged(self._h, (keep, host_funcs)):
            h = call(op, self._h, flags)
        return GraphExec._make(h, self.device, keep, host_funcs)

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

    def add_child(self, graph: Graph, after: Any = ()) -> GraphNode:
        """Run a copy of `graph` as one node (cuGraphAddChildGraphNode); later changes to `graph` do not reach it."""
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
        return self._node(h, "child")

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

    def add_conditional(self, kind: str, default: int = 0, after: Any = ()) -> ConditionalNode:
        """An "if" or "while" node with an empty body graph to fill (cuGraphAddNode, conditional)."""
        op = "cuGraphAddNode"
        self._check(op)
        drv = driver()
        types = {"if": drv.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_IF,
                 "while": drv.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_WHILE}
        if not isinstance(kind, str) or kind not in types:
            raise invalid(op, f"kind must be 'if' or 'while', got {kind!r}")
        if isinstance(default, bool) or not isinstance(default, int) or not 0 <= default < 1 << 32:
            raise invalid(op, f"default must be a non-negative int, got {default!r}")
        deps = _deps(self, after, op)
        self.device._bind_here()
        ctx = self.device._state.ctx
        handle = call("cuGraphConditionalHandleCreate", self._h, ctx, default, 1)  # CU_GRAPH_COND_ASSIGN_DEFAULT
        params = drv.CUgraphNodeParams()
        params.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
        params.conditional.handle = handle
        params.conditional.type = types[kind]
        params.conditional.size = 1
        params.conditional.ctx = ctx
        try:
            h = call(op, self._h, deps, None, len(deps), params)
        except TypeError:  # a binding of the CUDA 12.2 API: no edge data
            h = call(op, self._h, deps, len(deps), params)
        node = self._node(h, kind, ConditionalNode)
        node.handle = int(handle)
        node.body = Graph._make(params.conditional.phGraph_out[0], self.device, parent=self)
        return node

    # -- debugging ------------------------------------------------------------

    def dot(self, verbose: bool = False) -> str:
        """The graph in Graphviz DOT form (cuGraphDebugDotPrint); `verbose` adds every node's parameters."""
        op = "cuGraphDebugDotPrint"
        self._check(op)
        fd, path = tempfile.mkstemp(suffix=".dot")
        os.close(fd)
        try:
            call(op, self._h, path.encode(), 0xFFFF if verbose else 0)
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        finally:
            os.unlink(path)


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

    def set_params(self, node: GraphNode, *args: Any, **kwargs: Any) -> None:
        """Give one node of this executable graph new parameters: the arguments of the `Graph.add_*` call that
        made it, without `after` (cuGraphExec*NodeSetParams).  The node keeps its kind and place."""
        kind = getattr(node, "kind", None)
        op = f"GraphExec.set_params({kind})"
        if self._h is CLOSED:
            raise closed(op, "executable graph")
        if not isinstance(node, GraphNode):
            raise invalid(op, f"expected a GraphNode, got {type(node).__name__}")
        node.graph._check(op)  # a closed graph's node handles are freed with it: never hand one to the driver
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

    def update(self, graph: Graph) -> None:
        """Take the parameters of `graph` (a re-capture with the same topology) without re-instantiating.

        From then on this executable holds what `graph` holds (buffers, host
        functions) instead of what it held before; a rejected update changes nothing.
        """
        op = "cuGraphExecUpdate"
        if self._h is CLOSED:
            raise closed(op, "executable graph")
        if not isinstance(graph, Graph):
            raise invalid(op, f"expected a Graph, got {type(graph).__name__}")
        graph._check(op)  # a conditional body's handle goes with its parent graph
        self.device._bind_here()
        keep, host_funcs = list(graph._keep), list(graph._host_funcs)
        with _Staged(graph._h, (keep, host_funcs)):
            err, info = try_call(op, self._h, graph._h)
        if err:
            result = getattr(getattr(info, "result", None), "name", None) or _update_result(self._h, graph._h)

            raise driver_error(err, op, f"update result {result}; re-instantiate instead" if result else None)
        self._adopt(keep, host_funcs)

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



