"""cuda.core's graph nodes: `GraphNode` and its kinds, over a GraphDefinition's CUgraph.

Each node adder is the driver's (cuGraphAdd*Node); kernel nodes pack their
arguments with ironaccel's graph kernel parameters and host callbacks are
ironaccel's graph host functions.  One Python object stands for each driver node
(`_node_registry`, weak), so `nodes()`, `edges()`, `pred` and `succ` give back the
objects that made them.  A node keeps its graph definition alive.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Iterable, Iterator, MutableSet
from typing import Any

import numpy as np

from .. import _ia
from .._utils.cuda_utils import call, driver, from_ironaccel, guarded
from ..typing import GraphConditionalType, GraphMemoryType

__all__ = [
    "AllocNode", "ChildGraphNode", "ConditionalNode", "EmptyNode", "EventRecordNode", "EventWaitNode",
    "ExecutableChildGraphNode", "ExecutableEventRecordNode", "ExecutableEventWaitNode", "ExecutableGraphNode",
    "ExecutableHostCallbackNode", "ExecutableKernelNode", "ExecutableMemcpyNode", "ExecutableMemsetNode", "FreeNode",
    "GraphNode", "HostCallbackNode", "IfElseNode", "IfNode", "KernelNode", "MemcpyNode",
    "MemsetNode", "SwitchNode", "WhileNode",
]

_node_registry: weakref.WeakValueDictionary[int, GraphNode] = weakref.WeakValueDictionary()
_new = object.__new__


def _types() -> Any:
    return driver.CUgraphNodeType


class GraphNode:
    """A node of a graph definition; its builder methods add nodes that depend on it."""

    __slots__ = ("_h", "_id", "_graph", "__weakref__")
    _h: int
    _id: int
    _graph: Any

    def __init__(self) -> None:
        raise RuntimeError("graph nodes are made by GraphDefinition and GraphNode builder methods")

    @classmethod
    def _make(cls, h: int, graph: Any) -> Any:
        self = _new(cls)
        self._h = self._id = int(h)
        self._graph = graph
        self._setup()
        _node_registry[self._h] = self
        return self

    def _setup(self) -> None:
        pass

    @staticmethod
    def _make_entry(graph: Any) -> GraphNode:
        self = _new(GraphNode)
        self._h = self._id = 0
        self._graph = graph
        return self

    # -- identity ---------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GraphNode):
            return NotImplemented
        if self._id == 0 or other._id == 0:
            return self is other
        return self._id == other._id

    def __hash__(self) -> int:
        return hash((GraphNode, self._id)) if self._id else object.__hash__(self)

    def __repr__(self) -> str:
        if self._h == 0:
            return "<GraphNode entry>" if self._graph is not None else "<GraphNode destroyed>"
        try:
            extra = self._repr_extra()
        except Exception:  # a node whose graph is gone still has a repr
            extra = ""
        return f"<{type(self).__name__} handle={self._h:#x}{extra}>"

    def _repr_extra(self) -> str:
        """What cuda.core's repr of this node type shows after the handle (' name=value ...')."""
        return ""

    @property
    def type(self) -> Any:
        if self._h == 0:
            return None
        return _node_type(self._ia_node().kind)

    def _ia_node(self) -> Any:
        """This node as an ironaccel GraphNode (of its definition's ironaccel Graph)."""
        h = self._live()
        return guarded(self._graph._ia_graph().node, h)

    @property
    def graph(self) -> Any:
        return self._graph

    @property
    def handle(self) -> Any:
        return driver.CUgraphNode(self._h) if self._h else None

    @property
    def is_valid(self) -> bool:
        return self._h != 0 and self._graph is not None and self._graph.is_valid

    def _live(self) -> int:
        if self._graph is None:
            raise _invalid("the node has been destroyed")
        self._graph._check()
        return self._h

    def destroy(self) -> None:
        """Remove this node and its edges from the graph (cuGraphDestroyNode); idempotent.

        A child-graph or conditional node takes its body graphs with it: their nodes and graph views become
        invalid and their attachments are released."""
        if self._h == 0:
            return
        h = self._h
        root = self._graph._root
        nodes, graphs = [h], []
        if self._graph.is_valid:
            for sub in root.subgraphs.get(h, ()):
                graphs.append(sub)
                more_nodes, more_graphs = root.contents(sub)
                nodes.extend(more_nodes)
                graphs.extend(more_graphs)
            guarded(self._ia_node().destroy)
            root.release(h, graph_alive=True)  # the nodes inside its body graphs went with those graphs
        _tombstone(root, nodes, graphs)

    # -- edges ------------------------------------------------------------------------

    @property
    def pred(self) -> AdjacencySetProxy:
        return AdjacencySetProxy(self, False)

    @pred.setter
    def pred(self, value: Iterable[GraphNode]) -> None:
        proxy = AdjacencySetProxy(self, False)
        proxy.clear()
        proxy.update(value)

    @property
    def succ(self) -> AdjacencySetProxy:
        return AdjacencySetProxy(self, True)

    @succ.setter
    def succ(self, value: Iterable[GraphNode]) -> None:
        proxy = AdjacencySetProxy(self, True)
        proxy.clear()
        proxy.update(value)

    # -- builders ----------------------------------------------------------------------

    def _deps(self) -> list[Any]:
        self._live()
        return [driver.CUgraphNode(self._h)] if self._h else []

    def _add(self, cls: Any, op: str, *params: Any) -> Any:
        deps = self._deps()
        h = call(op, driver.CUgraph(self._graph._h), deps, len(deps), *params)
        return cls._make(int(h), self._graph)

    def _attach(self, node: GraphNode, *objects: Any) -> None:
        self._graph._root.attach(self._graph._h, node._h, *objects)

    def _reattach(self, *objects: Any) -> None:
        """This node's attachments are now `objects` (its parameters were replaced)."""
        root = self._graph._root
        root.release(self._h, graph_alive=True)
        root.attach(self._graph._h, self._h, *(o for o in objects if o is not None))

    def join(self, *nodes: GraphNode) -> EmptyNode:
        """An empty node after this node and `nodes` (cuGraphAddEmptyNode)."""
        self._live()
        deps = [] if self._h == 0 else [self]
        for n in nodes:
            if not isinstance(n, GraphNode):
                raise TypeError(f"join takes GraphNodes, got {type(n).__name__}")
            if n._graph != self._graph:
                raise ValueError("join takes nodes of the same graph definition")
            n._live()
            if n._h and n not in deps:
                deps.append(n)
        ia = self._graph._ia_graph()
        after = [guarded(ia.node, n._h) for n in deps]
        return EmptyNode._make(guarded(ia.add_empty, after).node_handle, self._graph)

    def launch(self, config: Any, kernel: Any, *args: Any) -> KernelNode:
        """A kernel launch after this node (cuGraphAddKernelNode)."""
        from ironaccel_cuda.graph import _kernel_params

        from .._launch_config import LaunchConfig
        from .._module import Kernel

        if not isinstance(config, LaunchConfig):
            raise TypeError(f"config must be a LaunchConfig, got {type(config).__name__}")
        if not isinstance(kernel, Kernel):
            raise TypeError(f"kernel must be a Kernel, got {type(kernel).__name__}")
        if not config._plain:
            raise NotImplementedError("clustered and cooperative launches are not supported in graph kernel nodes")
        self._live()
        dev = self._graph._device
        fn = kernel._on_device(dev.ordinal) if kernel._fn._ordinal != dev.ordinal else kernel._fn
        converted = tuple(_kernel_arg(a) for a in args)
        try:
            params, keep = _kernel_params(dev, fn, config.grid, config.block, converted, config.shmem_size,
                                          "cuGraphAddKernelNode")
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        _library_kernel(params, fn, dev)
        dev._bind_here()
        node = self._add(KernelNode, "cuGraphAddKernelNode", params)
        node._kernel = kernel
        node._args = args
        self._attach(node, kernel, keep, args)
        return node

    def allocate(self, size: int, *, device: Any = None, memory_type: Any = GraphMemoryType.DEVICE,
                 peer_access: Any = None) -> AllocNode:
        """A memory allocation after this node (cuGraphAddMemAllocNode); its address is `dptr`."""
        from .._device import Device

        kind = _memory_type(memory_type)
        self._live()
        dev = self._graph._device if device is None else Device(device)
        params = driver.CUDA_MEM_ALLOC_NODE_PARAMS()
        props = params.poolProps
        if kind == GraphMemoryType.MANAGED:
            props.allocType = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_MANAGED
        else:
            props.allocType = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        if kind == GraphMemoryType.HOST:
            props.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST
            props.location.id = 0
        else:
            props.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            props.location.id = dev.ordinal
        if peer_access:
            descs = []
            for peer in peer_access:
                desc = driver.CUmemAccessDesc()
                desc.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
                desc.location.id = Device(peer).ordinal
                desc.flags = driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                descs.append(desc)
            params.accessDescs = descs
            params.accessDescCount = len(descs)
        params.bytesize = size
        dev._bind_here()
        node = self._add(AllocNode, "cuGraphAddMemAllocNode", params)
        node._info = (int(params.dptr), int(size), dev.ordinal, str(kind),
                      tuple(Device(p).ordinal for p in peer_access or ()))
        return node

    def deallocate(self, dptr: int) -> FreeNode:
        """Free memory of an alloc node of this graph after this node (cuGraphAddMemFreeNode)."""
        return self._add(FreeNode, "cuGraphAddMemFreeNode", driver.CUdeviceptr(int(dptr)))

    def memset(self, dst: Any, value: Any, width: int, height: int = 1, pitch: int = 0, *,
               dst_owner: Any = None) -> MemsetNode:
        """Set `height` rows of `width` elements at `dst` to `value` (1, 2 or 4 bytes; cuGraphAddMemsetNode)."""
        ptr, owner = _operand(dst, dst_owner, "dst")
        fill, size = _fill_value(value)
        params = driver.CUDA_MEMSET_NODE_PARAMS()
        params.dst = driver.CUdeviceptr(ptr)
        params.value = fill
        params.elementSize = size
        params.width = width
        params.height = height
        params.pitch = pitch
        self._live()
        dev = self._graph._device
        dev._bind_here()
        node = self._add(MemsetNode, "cuGraphAddMemsetNode", params, dev._state.ctx)
        if owner is not None:
            self._attach(node, owner)
        return node

    def memcpy(self, dst: Any, src: Any, size: int, *, dst_owner: Any = None, src_owner: Any = None) -> MemcpyNode:
        """Copy `size` bytes from `src` to `dst` (device or pinned host addresses; cuGraphAddMemcpyNode)."""
        dst_ptr, dst_keep = _operand(dst, dst_owner, "dst")
        src_ptr, src_keep = _operand(src, src_owner, "src")
        params = _memcpy_params(dst_ptr, src_ptr, size)
        self._live()
        dev = self._graph._device
        dev._bind_here()
        node = self._add(MemcpyNode, "cuGraphAddMemcpyNode", params, dev._state.ctx)
        self._attach(node, *(o for o in (dst_keep, src_keep) if o is not None))
        return node

    def embed(self, child: Any) -> ChildGraphNode:
        """Run a copy of `child` as one node after this one (cuGraphAddChildGraphNode)."""
        from ._graph_definition import GraphDefinition

        if not isinstance(child, GraphDefinition):
            raise TypeError(f"child must be a GraphDefinition, got {type(child).__name__}")
        child_h = child._check()
        node = self._add(ChildGraphNode, "cuGraphAddChildGraphNode", driver.CUgraph(child_h))
        embedded = node._embedded()
        root = self._graph._root
        root.subgraphs[node._h] = [embedded]
        _import_attachments(child._root, child_h, root, embedded, node._h, self._graph._h)
        return node

    def record(self, event: Any) -> EventRecordNode:
        """Record `event` after this node (cuGraphAddEventRecordNode)."""
        node = self._add(EventRecordNode, "cuGraphAddEventRecordNode", _event_handle(event))
        node._event = event
        self._attach(node, event)
        return node

    def wait(self, event: Any) -> EventWaitNode:
        """Wait for `event` after this node (cuGraphAddEventWaitNode)."""
        node = self._add(EventWaitNode, "cuGraphAddEventWaitNode", _event_handle(event))
        node._event = event
        self._attach(node, event)
        return node

    def callback(self, fn: Any, *, user_data: Any = None) -> HostCallbackNode:
        """Run `fn` on a driver thread after this node (cuGraphAddHostNode); see cuda.core's rules."""
        params, held, python_fn = _host_params(fn, user_data)
        deps = [int(d) for d in self._deps()]
        h = _add_host_node(int(self._graph._h), deps, params)
        node = HostCallbackNode._make(h, self._graph)
        node._callback = python_fn
        self._attach(node, *held)
        return node

    def if_then(self, condition: Any) -> IfNode:
        """A node whose `then` branch runs when `condition` is non-zero."""
        return self._conditional(IfNode, condition, "IF", 1)

    def if_else(self, condition: Any) -> IfElseNode:
        """A node running its `then` branch when `condition` is non-zero, else its `else_` branch."""
        return self._conditional(IfElseNode, condition, "IF", 2)

    def while_loop(self, condition: Any) -> WhileNode:
        """A node whose `body` runs while `condition` is non-zero."""
        return self._conditional(WhileNode, condition, "WHILE", 1)

    def switch(self, condition: Any, count: int) -> SwitchNode:
        """A node that runs branch `condition` of its `count` branches (none when out of range)."""
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"count must be an int, got {type(count).__name__}")
        return self._conditional(SwitchNode, condition, "SWITCH", count)

    def _conditional(self, cls: Any, condition: Any, kind: str, size: int) -> Any:
        from ._graph_definition import GraphCondition, GraphDefinition

        if not isinstance(condition, GraphCondition):
            raise TypeError(f"condition must be a GraphCondition, got {type(condition).__name__}")
        deps = self._deps()
        if condition._graph_h != self._graph._root_h():
            raise _invalid("the condition was created for another graph")
        ia = self._graph._ia_graph()
        after = [guarded(ia.node, d) for d in deps]
        made = guarded(lambda: ia.add_conditional(kind.lower(), after=after, condition=int(condition), branches=size))
        node = cls._make(made.node_handle, self._graph)
        node._condition = condition
        node._cond_type = GraphConditionalType(kind.lower())
        node._branches = tuple(GraphDefinition._view(b.handle, self._graph._root, node) for b in made.bodies)
        self._graph._root.subgraphs[node._h] = [b._h for b in node._branches]
        return node


class AdjacencySetProxy(MutableSet):  # type: ignore[type-arg]
    """A node's predecessors (or successors) as a mutable set; changes are the graph's edges."""

    __slots__ = ("_node", "_fwd")

    def __init__(self, node: GraphNode, is_fwd: bool) -> None:
        self._node = node
        self._fwd = is_fwd

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set[Any]:  # type: ignore[override]
        return set(it)

    def _members(self) -> list[GraphNode]:
        node = self._node
        if node._h == 0 or node._graph is None or not node._graph.is_valid:
            return []
        node._live()
        op = "cuGraphNodeGetDependentNodes" if self._fwd else "cuGraphNodeGetDependencies"
        h = driver.CUgraphNode(node._h)
        count = call(op, h, 0)[-1]
        if not count:
            return []
        return [_wrap(int(n), node._graph) for n in call(op, h, count)[0][:count]]

    def __contains__(self, x: object) -> bool:
        return isinstance(x, GraphNode) and any(m == x for m in self._members())

    def __iter__(self) -> Iterator[GraphNode]:
        return iter(self._members())

    def __len__(self) -> int:
        return len(self._members())

    def _edges(self, others: Iterable[Any], op: str) -> None:
        node = self._node
        targets = []
        for other in others:
            if not isinstance(other, GraphNode):
                raise TypeError(f"expected a GraphNode, got {type(other).__name__}")
            targets.append(other)
        node._live()
        if node._h == 0:
            raise _invalid("the entry point takes no edges")
        for other in targets:
            other._live()
            if other._h == 0:
                raise _invalid("the entry point takes no edges")
        if not targets:
            return
        me = driver.CUgraphNode(node._h)
        them = [driver.CUgraphNode(t._h) for t in targets]
        src, dst = ([me] * len(them), them) if self._fwd else (them, [me] * len(them))
        call(op, driver.CUgraph(node._graph._h), src, dst, None, len(them))

    def add(self, value: GraphNode) -> None:
        if value not in self:
            self._edges([value], "cuGraphAddDependencies")

    def discard(self, value: GraphNode) -> None:
        if value in self:
            self._edges([value], "cuGraphRemoveDependencies")

    def clear(self) -> None:
        """Remove all edges in a single driver call."""
        self._edges(self._members(), "cuGraphRemoveDependencies")

    def __isub__(self, it: Any) -> AdjacencySetProxy:  # type: ignore[override,misc]
        current = set(self._members())
        self._edges([n for n in it if n in current], "cuGraphRemoveDependencies")
        return self

    def update(self, *others: Iterable[Any]) -> None:
        """Add edges to every node of `others`."""
        current = set(self._members())
        new: list[Any] = []
        for group in others:
            for n in group:
                if n not in current and n not in new:
                    new.append(n)
        self._edges(new, "cuGraphAddDependencies")

    def __ior__(self, it: Any) -> AdjacencySetProxy:  # type: ignore[override,misc]
        self.update(it)
        return self

    def __repr__(self) -> str:
        return f"{{{', '.join(repr(n) for n in self._members())}}}"


class EmptyNode(GraphNode):
    """An empty (join) node."""

    __slots__ = ()


class KernelNode(GraphNode):
    """A kernel launch node."""

    __slots__ = ("_kernel", "_args")
    _kernel: Any
    _args: Any

    def _setup(self) -> None:
        self._kernel = None
        self._args = None

    def update(self, *, config: Any = None, kernel: Any = None, args: Any = None) -> None:
        """Replace the launch configuration, the kernel and/or the arguments (cuGraphKernelNodeSetParams);
        a new kernel needs its `args` (`args=()` for none)."""
        from ironaccel_cuda.graph import _kernel_params

        from .._launch_config import LaunchConfig
        from .._module import Kernel

        h = self._live()
        if config is not None and not isinstance(config, LaunchConfig):
            raise TypeError(f"config must be a LaunchConfig, got {type(config).__name__}")
        if kernel is not None and not isinstance(kernel, Kernel):
            raise TypeError(f"kernel must be a Kernel, got {type(kernel).__name__}")
        if kernel is not None and args is None:
            raise ValueError("a new kernel needs its args (args=() for a kernel without parameters)")
        if config is not None and not config._plain:
            raise NotImplementedError("clustered and cooperative launches are not supported in graph kernel nodes")
        config = self.config if config is None else config
        kernel = self.kernel if kernel is None else kernel
        if args is None:
            if self._args is None:
                raise ValueError("the node's arguments are not known here: give args")
            args = self._args
        args = tuple(args)
        dev = self._graph._device
        fn = kernel._on_device(dev.ordinal) if kernel._fn._ordinal != dev.ordinal else kernel._fn
        try:
            params, keep = _kernel_params(dev, fn, config.grid, config.block, tuple(_kernel_arg(a) for a in args),
                                          config.shmem_size, "cuGraphKernelNodeSetParams")
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        _library_kernel(params, fn, dev)
        call("cuGraphKernelNodeSetParams", driver.CUgraphNode(h), params)
        self._kernel, self._args = kernel, args
        self._reattach(kernel, keep, args)

    def _params(self) -> Any:
        return guarded(self._ia_node().params)

    @property
    def grid(self) -> tuple[int, int, int]:
        return self._params().grid  # type: ignore[no-any-return]

    @property
    def block(self) -> tuple[int, int, int]:
        return self._params().block  # type: ignore[no-any-return]

    @property
    def shmem_size(self) -> int:
        return int(self._params().shared_mem)

    @property
    def kernel(self) -> Any:
        if self._kernel is None:
            from .._module import Kernel

            self._kernel = Kernel.from_handle(self._params().function)
        return self._kernel

    def _repr_extra(self) -> str:
        return f" kernel={self._params().function:#x}"

    @property
    def config(self) -> Any:
        from .._launch_config import LaunchConfig

        p = self._params()
        return LaunchConfig(grid=p.grid, block=p.block, shmem_size=p.shared_mem)


class AllocNode(GraphNode):
    """A memory allocation node: `dptr` is valid from this node until its free node."""

    __slots__ = ("_info",)

    def _setup(self) -> None:
        p = guarded(self._ia_node().params)
        self._info = (p.ptr, p.size, p.location, p.memory_type, p.peers)

    @property
    def dptr(self) -> int:
        return self._info[0]

    @property
    def bytesize(self) -> int:
        return self._info[1]

    @property
    def device_id(self) -> int:
        return self._info[2]

    @property
    def memory_type(self) -> str:
        return self._info[3]

    @property
    def peer_access(self) -> tuple[int, ...]:
        return self._info[4]

    def _repr_extra(self) -> str:
        return f" dptr={self._info[0]:#x} size={self._info[1]}"


class FreeNode(GraphNode):
    """A memory free node."""

    __slots__ = ("_dptr",)

    def _setup(self) -> None:
        self._dptr = guarded(self._ia_node().params).ptr

    @property
    def dptr(self) -> int:
        return self._dptr

    def _repr_extra(self) -> str:
        return f" dptr={self._dptr:#x}"


class MemsetNode(GraphNode):
    """A memset node (its parameters as made, readable after it was destroyed)."""

    __slots__ = ("_params",)

    def _setup(self) -> None:
        self._params = tuple(guarded(self._ia_node().params))

    def update(self, *, dst: Any = None, value: Any = None, width: int | None = None, height: int | None = None,
               pitch: int | None = None, dst_owner: Any = None) -> None:
        """Replace the given memset parameters, keeping the others (cuGraphMemsetNodeSetParams)."""
        h = self._live()
        if dst is None and dst_owner is not None:
            raise ValueError("dst_owner needs a raw-address dst")
        old_dst, old_value, old_size, old_width, old_height, old_pitch = self._params
        ptr, owner = (old_dst, None) if dst is None else _operand(dst, dst_owner, "dst")
        fill, size = (old_value, old_size) if value is None else _fill_value(value)
        params = driver.CUDA_MEMSET_NODE_PARAMS()
        params.dst = driver.CUdeviceptr(ptr)
        params.value = fill
        params.elementSize = size
        params.width = old_width if width is None else width
        params.height = old_height if height is None else height
        params.pitch = old_pitch if pitch is None else pitch
        self._graph._device._bind_here()
        call("cuGraphMemsetNodeSetParams", driver.CUgraphNode(h), params)
        self._params = (ptr, fill, size, int(params.width), int(params.height), int(params.pitch))
        if dst is not None:
            self._reattach(owner)

    @property
    def dptr(self) -> int:
        return self._params[0]

    @property
    def value(self) -> int:
        return self._params[1]

    @property
    def element_size(self) -> int:
        return self._params[2]

    @property
    def width(self) -> int:
        return self._params[3]

    @property
    def height(self) -> int:
        return self._params[4]

    @property
    def pitch(self) -> int:
        return self._params[5]

    def _repr_extra(self) -> str:
        return f" dptr={self._params[0]:#x} value={self._params[1]}"


class MemcpyNode(GraphNode):
    """A one-dimensional memcpy node."""

    __slots__ = ("_params",)

    def _setup(self) -> None:
        self._params = tuple(guarded(self._ia_node().params))

    def update(self, *, dst: Any = None, src: Any = None, size: int | None = None, dst_owner: Any = None,
               src_owner: Any = None) -> None:
        """Replace the given copy parameters, keeping the others (cuGraphMemcpyNodeSetParams)."""
        h = self._live()
        if (dst is None and dst_owner is not None) or (src is None and src_owner is not None):
            raise ValueError("an owner needs a raw-address operand beside it")
        root = self._graph._root
        kept = list(root.attachments.get(h, ()))
        old_dst, old_src, old_size = self._params
        dst_ptr, dst_keep = (old_dst, None) if dst is None else _operand(dst, dst_owner, "dst")
        src_ptr, src_keep = (old_src, None) if src is None else _operand(src, src_owner, "src")
        size = old_size if size is None else size
        self._graph._device._bind_here()
        call("cuGraphMemcpyNodeSetParams", driver.CUgraphNode(h), _memcpy_params(dst_ptr, src_ptr, size))
        self._params = (dst_ptr, src_ptr, size)
        if dst is not None or src is not None:
            self._reattach(*(kept if dst is None or src is None else ()), dst_keep, src_keep)

    @property
    def dst(self) -> int:
        return self._params[0]

    @property
    def src(self) -> int:
        return self._params[1]

    @property
    def size(self) -> int:
        return self._params[2]

    def _repr_extra(self) -> str:
        dst, src, size = self._params
        dt, st = ("H" if _is_host(ptr) else "D" for ptr in (dst, src))
        return f" dst={dst:#x}({dt}) src={src:#x}({st}) size={size}"


class ChildGraphNode(GraphNode):
    """A node that runs a child graph (a copy of the one embedded)."""

    __slots__ = ("_child",)
    _child: Any

    def _setup(self) -> None:
        self._child = None

    @property
    def child_graph(self) -> Any:
        from ._graph_definition import GraphDefinition

        if self._child is None:
            self._child = GraphDefinition._view(self._embedded(), self._graph._root, self)
        return self._child

    def _embedded(self) -> int:
        """The handle of the graph this node runs (the embedded copy)."""
        return guarded(lambda: self._ia_node().child.handle)  # type: ignore[no-any-return]

    def _repr_extra(self) -> str:
        return f" child={self._embedded():#x}"


class _EventNode(GraphNode):
    __slots__ = ("_event",)
    _getter = ""
    _setter = ""

    def _setup(self) -> None:
        self._event = None

    @property
    def event(self) -> Any:
        """The Event given to this node; for a node made elsewhere, the driver's CUevent."""
        if self._event is None:
            self._event = call(self._getter, driver.CUgraphNode(self._live()))
        return self._event

    def update(self, event: Any) -> None:
        """Replace the event (cuGraphEvent*NodeSetEvent)."""
        h = self._live()
        call(self._setter, driver.CUgraphNode(h), _event_handle(event))
        self._event = event
        self._reattach(event)

    def _repr_extra(self) -> str:
        event = self.event
        handle = getattr(event, "_h", event)
        return f" event={int(handle):#x}"


class EventRecordNode(_EventNode):
    """A node that records an event."""

    __slots__ = ()
    _getter = "cuGraphEventRecordNodeGetEvent"
    _setter = "cuGraphEventRecordNodeSetEvent"


class EventWaitNode(_EventNode):
    """A node that waits for an event."""

    __slots__ = ()
    _getter = "cuGraphEventWaitNodeGetEvent"
    _setter = "cuGraphEventWaitNodeSetEvent"


class HostCallbackNode(GraphNode):
    """A node that runs a host callback."""

    __slots__ = ("_callback",)

    def _setup(self) -> None:
        self._callback = None

    @property
    def callback(self) -> Any:
        return self._callback

    def _repr_extra(self) -> str:
        if self._callback is not None:
            return f" callback={getattr(self._callback, '__name__', '?')}"
        return f" cfunc={guarded(self._ia_node().params).fn:#x}"

    def update(self, fn: Any, *, user_data: Any = None) -> None:
        """Replace the callback and its user data (cuGraphHostNodeSetParams)."""
        from ironaccel_cuda import hostfn
        from ironaccel_cuda.errors import driver_error

        h = self._live()
        params, held, python_fn = _host_params(fn, user_data)
        op = "cuGraphHostNodeSetParams"
        set_params = hostfn._entry(op, ctypes.c_void_p, ctypes.c_void_p)
        err = set_params(h, ctypes.addressof(params))
        if err:
            raise from_ironaccel(driver_error(err, op))
        self._callback = python_fn
        self._reattach(*held)


class ConditionalNode(GraphNode):
    """A conditional node (IfNode, IfElseNode, WhileNode, SwitchNode when made here)."""

    __slots__ = ("_condition", "_cond_type", "_branches")

    def _setup(self) -> None:
        self._condition = None
        self._cond_type = None
        self._branches: tuple[Any, ...] = ()

    @property
    def condition(self) -> Any:
        return self._condition

    @property
    def cond_type(self) -> Any:
        return self._cond_type

    @property
    def branches(self) -> tuple[Any, ...]:
        return self._branches

    def _repr_extra(self) -> str:  # the bare ConditionalNode (made elsewhere) shows only its handle, as in cuda.core
        if type(self) is ConditionalNode or self._condition is None:
            return ""
        return f" condition={self._condition._handle:#x}"


class IfNode(ConditionalNode):
    """An if node: `then` runs when the condition is non-zero."""

    __slots__ = ()

    @property
    def then(self) -> Any:
        return self._branches[0]


class IfElseNode(ConditionalNode):
    """An if-else node: `then` when the condition is non-zero, else `else_`."""

    __slots__ = ()

    @property
    def then(self) -> Any:
        return self._branches[0]

    @property
    def else_(self) -> Any:
        return self._branches[1]


class WhileNode(ConditionalNode):
    """A while node: `body` runs while the condition is non-zero."""

    __slots__ = ()

    @property
    def body(self) -> Any:
        return self._branches[0]


class SwitchNode(ConditionalNode):
    """A switch node: branch `condition` runs."""

    __slots__ = ()


# -- reconstruction and parameters (cold) --------------------------------------------------------

_BY_KIND: dict[str, type] = {
    "empty": EmptyNode, "kernel": KernelNode, "alloc": AllocNode, "free": FreeNode, "memset": MemsetNode,
    "memcpy": MemcpyNode, "child": ChildGraphNode, "event_record": EventRecordNode, "event_wait": EventWaitNode,
    "host": HostCallbackNode, "conditional": ConditionalNode, "if": ConditionalNode, "while": ConditionalNode,
    "switch": ConditionalNode,
}

#: ironaccel's node kinds as CUgraphNodeType member names (cuda.core's `GraphNode.type`).
_TYPE_NAMES: dict[str, str] = {
    "kernel": "KERNEL", "memcpy": "MEMCPY", "memset": "MEMSET", "host": "HOST", "child": "GRAPH", "empty": "EMPTY",
    "event_wait": "WAIT_EVENT", "event_record": "EVENT_RECORD", "ext_semaphore_signal": "EXT_SEMAS_SIGNAL",
    "ext_semaphore_wait": "EXT_SEMAS_WAIT", "alloc": "MEM_ALLOC", "free": "MEM_FREE", "batch_mem_op": "BATCH_MEM_OP",
    "conditional": "CONDITIONAL", "if": "CONDITIONAL", "while": "CONDITIONAL", "switch": "CONDITIONAL",
    "memcpy_batch": "MEMCPY_BATCH",
}


def _node_type(kind: str) -> Any:
    """The CUgraphNodeType of an ironaccel node kind (None for a kind ironaccel does not name)."""
    name = _TYPE_NAMES.get(kind)
    return getattr(_types(), "CU_GRAPH_NODE_TYPE_" + name) if name else None


def _wrap(h: int, graph: Any, kind: str | None = None) -> GraphNode:
    """The node object of driver node `h` of `graph` (the one made before, while it lives); `kind`: ironaccel's
    name of its kind, when known."""
    node = _node_registry.get(h)
    if node is not None:
        return node
    if kind is None:
        kind = guarded(graph._ia_graph().node, h).kind
    cls = _BY_KIND.get(kind or "", GraphNode)
    if cls is GraphNode:
        self = _new(GraphNode)
        self._h = self._id = h
        self._graph = graph
        _node_registry[h] = self
        return self
    return cls._make(h, graph)  # type: ignore[attr-defined, no-any-return]


def _invalid(detail: str) -> Exception:
    from .._utils.cuda_utils import CUDAError

    return CUDAError(f"CUDA_ERROR_INVALID_VALUE: {detail}", op="cuda.core.graph", code=1,
                     code_name="CUDA_ERROR_INVALID_VALUE")


def _tombstone(root: Any, nodes: list[int], graphs: list[int]) -> None:
    """Nodes and graphs that no longer exist: release their attachments and invalidate their objects."""
    from ._graph_definition import _definitions

    for h in nodes:
        root.release(h, graph_alive=False)
        root.subgraphs.pop(h, None)
        node = _node_registry.pop(h, None)
        if node is not None:
            node._h = 0
            node._graph = None
            if isinstance(node, HostCallbackNode):
                node._callback = None
    for h in graphs:
        view = _definitions.get(h)
        if view is not None and view._root is root:
            view._h = 0


def _import_attachments(src_root: Any, src_h: int, root: Any, embedded_h: int, owner_h: int,
                        owner_graph_h: int) -> None:
    """Give the nodes of an embedded clone the attachments of the nodes they copy (matched by position and
    type, through nested child graphs); what cannot be matched stays with the child node `owner_h` (of graph
    `owner_graph_h`).  The driver gave the clone references to the originals' user objects, so destroying a
    copy gives its graph's reference back."""
    from ._graph_definition import graph_nodes

    source = graph_nodes(src_h, src_root.ia.device)
    copies = graph_nodes(embedded_h, root.ia.device)
    if len(source) != len(copies) or any(c.kind != n.kind for c, n in zip(copies, source)):
        root.attach(owner_graph_h, owner_h, *src_root.held_in(src_h))
        return
    for original_node, copy_node in zip(source, copies):
        original, copy = original_node.node_handle, copy_node.node_handle
        root.adopt(embedded_h, copy, src_root, original)
        if copy_node.kind == "child":
            inner = guarded(lambda: copy_node.child.handle)
            root.subgraphs[copy] = [inner]
            src_inner = src_root.subgraphs.get(original, [])
            if src_inner:
                _import_attachments(src_root, src_inner[0], root, inner, copy, embedded_h)
        elif original in src_root.subgraphs:
            for sub in src_root.subgraphs[original]:
                root.attach(embedded_h, copy, *src_root.held_in(sub))


def _memory_type(value: Any) -> GraphMemoryType:
    try:
        return GraphMemoryType(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in GraphMemoryType)
        raise ValueError(f"{value!r} is not a valid GraphMemoryType. Must be one of: {choices}") from None


def _kernel_arg(arg: Any) -> Any:
    from .._kernel_arg_handler import convert_arg
    from ._graph_definition import GraphCondition

    if isinstance(arg, GraphCondition):
        return np.uint64(arg._handle)
    return convert_arg(arg)


def _operand(obj: Any, owner: Any, side: str) -> tuple[int, Any]:
    """(address, what the graph keeps alive) of a memset/memcpy operand: a Buffer, or an int with an owner."""
    from .._memory._buffer import Buffer

    if isinstance(obj, Buffer):
        if owner is not None:
            raise ValueError(f"{side}_owner cannot be used when {side} is a Buffer")
        if obj.is_closed:
            raise ValueError(f"{side} Buffer has no active allocation")
        return int(obj._ptr), obj
    if isinstance(obj, bool) or not isinstance(obj, int):
        try:
            ptr = int(obj)
        except (TypeError, ValueError):
            raise TypeError(f"{side} must be a Buffer or an int address, got {type(obj).__name__}") from None
    else:
        ptr = obj
    if isinstance(owner, Buffer) and owner.is_closed:
        raise ValueError(f"{side}_owner Buffer has no active allocation")
    return ptr, owner


def _fill_value(value: Any) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < 256:
            raise ValueError(f"an int fill value must be in [0, 256), got {value}")
        return value, 1
    try:
        data = bytes(memoryview(value))
    except TypeError:
        raise TypeError(f"value must be an int or a buffer of 1, 2 or 4 bytes, got {type(value).__name__}") from None
    if len(data) not in (1, 2, 4):
        raise ValueError(f"value must be 1, 2 or 4 bytes, got {len(data)} bytes")
    return int.from_bytes(data, "little"), len(data)


def _is_host(ptr: int) -> bool:
    """Whether the driver knows `ptr` as host memory (pinned or registered); anything else is taken as device memory
    (graph allocations, pools, managed memory)."""
    from .._utils.cuda_utils import pointer_attribute

    return pointer_attribute(ptr, "memory_type") == int(driver.CUmemorytype.CU_MEMORYTYPE_HOST)


def _memcpy_params(dst: int, src: int, size: int) -> Any:
    params = driver.CUDA_MEMCPY3D()
    kinds = driver.CUmemorytype
    for side, ptr in (("src", src), ("dst", dst)):
        if _is_host(ptr):
            setattr(params, f"{side}MemoryType", kinds.CU_MEMORYTYPE_HOST)
            setattr(params, f"{side}Host", ptr)
        else:
            setattr(params, f"{side}MemoryType", kinds.CU_MEMORYTYPE_DEVICE)
            setattr(params, f"{side}Device", driver.CUdeviceptr(ptr))
    params.WidthInBytes = size
    params.Height = 1
    params.Depth = 1
    return params


def _event_handle(event: Any) -> Any:
    from .._event import Event

    if not isinstance(event, Event):
        raise TypeError(f"event must be an Event, got {type(event).__name__}")
    if event._h is _ia.CLOSED:
        raise RuntimeError("the event is closed")
    return driver.CUevent(int(event._h))


def _host_params(fn: Any, user_data: Any) -> tuple[Any, list[Any], Any]:
    """(CUDA_HOST_NODE_PARAMS as two pointers, what the graph keeps, the Python callable or None)."""
    from ironaccel_cuda import hostfn

    if isinstance(fn, ctypes._CFuncPtr):  # type: ignore[attr-defined]
        _check_cfunc(fn)
        held: list[Any] = [fn]
        if user_data is None:
            data = 0
        elif isinstance(user_data, int) and not isinstance(user_data, bool):
            data = user_data
        else:
            raw = bytes(memoryview(user_data))
            copy = ctypes.create_string_buffer(raw, max(len(raw), 1))
            held.append(copy)
            data = ctypes.addressof(copy)
        fn_address = ctypes.cast(fn, ctypes.c_void_p).value or 0
        return (ctypes.c_void_p * 2)(fn_address, data or None), held, None
    if not callable(fn):
        raise TypeError(f"fn must be a callable or a ctypes function pointer, got {type(fn).__name__}")
    if user_data is not None:
        raise ValueError("user_data is only supported with ctypes function pointers")
    params, entry = hostfn.host_node_params(fn, None, "cuGraphAddHostNode")
    return params, [entry, params], fn


def _check_cfunc(fn: Any) -> None:
    hint = "ctypes.CFUNCTYPE(None, ctypes.c_void_p)"
    restype = getattr(fn, "restype", None)
    argtypes = getattr(fn, "argtypes", None)
    if restype is not None or argtypes is None or len(argtypes) != 1 or argtypes[0] is not ctypes.c_void_p:
        raise TypeError(f"a ctypes host callback must be declared as CUhostFn, {hint}")


def _add_host_node(graph_h: int, deps: list[int], params: Any) -> int:
    from ironaccel_cuda import hostfn
    from ironaccel_cuda.errors import driver_error

    op = "cuGraphAddHostNode"
    node = ctypes.c_void_p()
    array = (ctypes.c_void_p * max(len(deps), 1))(*deps)
    add = hostfn._entry(op, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                        ctypes.c_void_p)
    err = add(ctypes.byref(node), graph_h, array if deps else None, len(deps), ctypes.addressof(params))
    if err:
        raise from_ironaccel(driver_error(err, op))
    return int(node.value or 0)



# -- executable-graph views ------------------------------------------------------------------------


class ExecutableGraphNode:
    """A node of an executable graph (`graph[node]`): change what its future launches do."""

    __slots__ = ("_graph", "_node")
    _graph: Any
    _node: GraphNode

    def __init__(self) -> None:
        raise RuntimeError("executable graph nodes are made by graph[node]")

    @classmethod
    def _init(cls, graph: Any, node: GraphNode) -> Any:
        self = _new(cls)
        self._graph = graph
        self._node = node
        return self

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self._node!r}>"

    def _handles(self) -> tuple[Any, Any]:
        exe = self._graph._exe
        if exe is None or exe._h is _ia.CLOSED:
            raise RuntimeError("the graph is closed")
        return driver.CUgraphExec(int(exe._h)), driver.CUgraphNode(self._node._live())

    def _hold(self, keep: list[Any], host_funcs: list[Any] | None = None) -> None:
        self._graph._exe._hold(keep, host_funcs or [])

    def _views(self) -> tuple[Any, Any]:
        """(the ironaccel GraphExec, the ironaccel GraphNode) this view changes."""
        self._handles()
        return self._graph._exe, self._node._ia_node()


class _Switchable(ExecutableGraphNode):
    __slots__ = ()

    @property
    def is_enabled(self) -> bool:
        exe, node = self._views()
        return guarded(exe.is_enabled, node)  # type: ignore[no-any-return]

    def enable(self) -> None:
        exe, node = self._views()
        guarded(exe.set_enabled, node, True)

    def disable(self) -> None:
        exe, node = self._views()
        guarded(exe.set_enabled, node, False)


class ExecutableKernelNode(_Switchable):
    """An executable kernel node."""

    __slots__ = ()

    def update(self, *, config: Any, kernel: Any, args: Any) -> None:
        """Replace the launch configuration, kernel and all arguments (cuGraphExecKernelNodeSetParams)."""
        from ironaccel_cuda.graph import _kernel_params

        from .._launch_config import LaunchConfig
        from .._module import Kernel

        if not isinstance(config, LaunchConfig):
            raise TypeError(f"config must be a LaunchConfig, got {type(config).__name__}")
        if not isinstance(kernel, Kernel):
            raise TypeError(f"kernel must be a Kernel, got {type(kernel).__name__}")
        exe, node = self._handles()
        dev = self._graph._exe.device
        fn = kernel._on_device(dev.ordinal) if kernel._fn._ordinal != dev.ordinal else kernel._fn
        try:
            params, keep = _kernel_params(dev, fn, config.grid, config.block, tuple(_kernel_arg(a) for a in args),
                                          config.shmem_size, "cuGraphExecKernelNodeSetParams")
        except _ia.DriverError as exc:
            raise from_ironaccel(exc) from None
        _library_kernel(params, fn, dev)
        call("cuGraphExecKernelNodeSetParams", exe, node, params)
        self._hold([kernel, keep, tuple(args)])


class ExecutableMemsetNode(_Switchable):
    """An executable memset node."""

    __slots__ = ()

    def update(self, *, dst: Any, value: Any, width: int, height: int = 1, pitch: int = 0) -> None:
        exe, node = self._handles()
        ptr, owner = _operand(dst, None, "dst")
        fill, size = _fill_value(value)
        params = driver.CUDA_MEMSET_NODE_PARAMS()
        params.dst = driver.CUdeviceptr(ptr)
        params.value = fill
        params.elementSize = size
        params.width = width
        params.height = height
        params.pitch = pitch
        call("cuGraphExecMemsetNodeSetParams", exe, node, params, self._graph._exe.device._state.ctx)
        self._hold([owner])


class ExecutableMemcpyNode(_Switchable):
    """An executable memcpy node."""

    __slots__ = ()

    def update(self, *, dst: Any, src: Any, size: int) -> None:
        exe, node = self._handles()
        dst_ptr, dst_keep = _operand(dst, None, "dst")
        src_ptr, src_keep = _operand(src, None, "src")
        call("cuGraphExecMemcpyNodeSetParams", exe, node, _memcpy_params(dst_ptr, src_ptr, size),
             self._graph._exe.device._state.ctx)
        self._hold([dst_keep, src_keep])


class ExecutableChildGraphNode(ExecutableGraphNode):
    """An executable child-graph node."""

    __slots__ = ()

    def update(self, child: Any) -> None:
        from ._graph_definition import GraphDefinition

        if not isinstance(child, GraphDefinition):
            raise TypeError(f"child must be a GraphDefinition, got {type(child).__name__}")
        exe, node = self._views()
        borrowed = guarded(_ia.IaGraph.from_handle, child._check(), exe.device)
        guarded(exe.set_params, node, borrowed)
        held = child._root.held()
        self._hold(held, [h for h in held if _is_host_func(h)])


class ExecutableEventRecordNode(ExecutableGraphNode):
    """An executable event-record node."""

    __slots__ = ()

    def update(self, event: Any) -> None:
        _event_handle(event)
        exe, node = self._views()
        guarded(exe.set_params, node, event)


class ExecutableEventWaitNode(ExecutableGraphNode):
    """An executable event-wait node."""

    __slots__ = ()

    def update(self, event: Any) -> None:
        _event_handle(event)
        exe, node = self._views()
        guarded(exe.set_params, node, event)


class ExecutableHostCallbackNode(ExecutableGraphNode):
    """An executable host-callback node."""

    __slots__ = ()

    def update(self, fn: Any, *, user_data: Any = None) -> None:
        from ironaccel_cuda import hostfn
        from ironaccel_cuda.errors import driver_error

        exe, node = self._handles()
        params, held, _ = _host_params(fn, user_data)
        op = "cuGraphExecHostNodeSetParams"
        set_params = hostfn._entry(op, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        err = set_params(int(exe), int(node), ctypes.addressof(params))
        if err:
            raise from_ironaccel(driver_error(err, op))
        self._hold(held, [h for h in held if _is_host_func(h)])


def _is_host_func(obj: Any) -> bool:
    from ironaccel_cuda.hostfn import HostFunc

    return isinstance(obj, HostFunc)


_EXECUTABLE: dict[type, type] = {
    KernelNode: ExecutableKernelNode, MemsetNode: ExecutableMemsetNode, MemcpyNode: ExecutableMemcpyNode,
    ChildGraphNode: ExecutableChildGraphNode, EventRecordNode: ExecutableEventRecordNode,
    EventWaitNode: ExecutableEventWaitNode, HostCallbackNode: ExecutableHostCallbackNode,
}


def executable_node(graph: Any, node: Any) -> ExecutableGraphNode:
    """`graph[node]`: the view of `node` (of the definition `graph` was made from) in `graph`."""
    if not isinstance(node, GraphNode):
        raise TypeError(f"expected a GraphNode, got {type(node).__name__}")
    for cls, view in _EXECUTABLE.items():
        if isinstance(node, cls):
            return view._init(graph, node)  # type: ignore[attr-defined, no-any-return]
    raise TypeError(f"{type(node).__name__} has no executable-graph view")


def update_from_definition(graph: Any, definition: Any) -> None:
    """`Graph.update(definition)`: take the parameters of a definition of the same topology (cuGraphExecUpdate)."""
    from .._utils.cuda_utils import CUDAError

    exe = graph._exe
    if exe is None:
        raise RuntimeError("the graph is closed")
    h = definition._check()
    held = definition._root.held() if definition._view_of is None else definition._root.held_in(h)
    source = definition._ia_graph()
    if source is definition._root.ia:  # the root Graph holds its own lists: add the nodes' attachments alone
        held = [obj for objs in definition._root.attachments.values() for obj in objs]
    try:
        exe.update(source, keep=held)
    except _ia.DriverError as exc:
        if exc.code is None:
            raise from_ironaccel(exc) from None
        from .._utils.cuda_utils import _code_name

        result = getattr(exc, "update_result", None)
        why = ""
        if result:
            why = " (CU_GRAPH_EXEC_UPDATE_ERROR" + ("" if result == "error" else "_" + result.upper()) + ")"
        raise CUDAError(f"Graph update failed: {_code_name(int(exc.code))}{why}", op="cuGraphExecUpdate",
                        code=int(exc.code)) from None


def _library_kernel(params: Any, fn: Any, dev: Any) -> None:
    """Put a library kernel (a CUkernel) where a kernel node takes one: `kern`, with `func` NULL and the device's
    context as `ctx` (CUDA_KERNEL_NODE_PARAMS: `func` is a CUfunction; `kern` is read when `func` is NULL)."""
    kern = getattr(fn, "_kernel", None)
    if kern is not None:
        params.func = driver.CUfunction(0)
        params.kern = driver.CUkernel(int(kern))
        params.ctx = driver.CUcontext(int(dev._state.ctx))
