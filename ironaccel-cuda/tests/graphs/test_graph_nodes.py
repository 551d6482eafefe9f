"""A graph's nodes as objects: listed with their edges, read back, destroyed, switched off in an executable graph;
conditions shared among conditional nodes; whole-graph update's typed result; capture into an existing graph."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from helpers import FAKE
from helpers.expect import raises_exactly

import ironaccel_cuda as cu
from ironaccel import ClosedError, DriverError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")

N = 256


def _saxpy_graph(dev, fn, x, y):
    g = cu.Graph(dev)
    zero = g.add_memset(y, 0)
    k = g.add_kernel(fn, 1, N, np.float32(2), x, y, np.uint32(N), after=zero)
    return g, zero, k


def test_nodes_and_edges_list_the_same_objects_as_made(dev, kernels):
    fn = kernels.function("saxpy")
    x, y = dev.alloc(N, "float32"), dev.alloc(N, "float32")
    g, zero, k = _saxpy_graph(dev, fn, x, y)
    join = g.add_empty(after=[zero, k])
    nodes = g.nodes()
    assert set(nodes) == {zero, k, join} and len(nodes) == 3
    assert {n.kind for n in nodes} == {"memset", "kernel", "empty"}
    assert set(g.edges()) == {(zero, k), (zero, join), (k, join)}
    assert g.node(k.node_handle) == k and g.node(k.node_handle).kind == "kernel"
    other = cu.Graph(dev)
    raises_exactly(InvalidArgument, "Graph.node", other.node, k.node_handle)
    raises_exactly(InvalidArgument, "Graph.node", g.node, "k")
    assert other.nodes() == [] and other.edges() == []
    other.close()
    g.close()
    raises_exactly(ClosedError, "cuGraphGetNodes", g.nodes)
    raises_exactly(ClosedError, "GraphNode.node_handle", lambda: k.node_handle)


def test_params_read_back(dev, kernels):
    fn = kernels.function("saxpy")
    x, y = dev.alloc(N, "float32"), dev.alloc(N, "float32")
    host = np.zeros(N, np.float32)
    g, zero, k = _saxpy_graph(dev, fn, x, y)
    assert zero.params() == cu.MemsetNodeParams(y.ptr, 0, 4, N, 1, 0)
    kp = k.params()
    assert isinstance(kp, cu.KernelNodeParams)
    assert kp.grid == (1, 1, 1) and kp.block == (N, 1, 1) and kp.shared_mem == 0 and kp.function
    copy = g.add_memcpy(host, y, after=k)
    assert copy.params() == cu.MemcpyNodeParams(host.ctypes.data, y.ptr, N * 4)
    alloc = g.add_alloc(N, "float32", after=copy)
    free = g.add_free(alloc, after=alloc)
    ap = alloc.params()
    assert (ap.ptr, ap.size, ap.memory_type, ap.location) == (alloc.buffer.ptr, N * 4, "device", dev.ordinal)
    assert free.params() == cu.FreeNodeParams(alloc.buffer.ptr)
    listed = {n: n for n in g.nodes()}
    assert listed[alloc].buffer.ptr == alloc.buffer.ptr  # an alloc node read back has its buffer too
    e = g.add_empty()
    raises_exactly(InvalidArgument, "GraphNode.params(empty)", e.params)
    g.close()


def test_host_node_params_read_back(dev):
    g = cu.Graph(dev)
    node = g.add_host_func(lambda: None)
    p = node.params()
    assert isinstance(p, cu.HostNodeParams) and p.fn
    g.close()


def test_destroyed_node_is_gone_and_refused(dev, kernels):
    fn = kernels.function("saxpy")
    x, y = dev.alloc(N, "float32"), dev.alloc(N, "float32")
    g, zero, k = _saxpy_graph(dev, fn, x, y)
    extra = g.add_empty(after=k)
    extra.destroy()
    extra.destroy()  # idempotent
    assert extra.destroyed and extra not in g.nodes() and g.node_count == 2
    assert set(g.edges()) == {(zero, k)}
    raises_exactly(ClosedError, "cuGraphAddEmptyNode", g.add_empty, after=extra)
    raises_exactly(ClosedError, "GraphNode.params(empty)", extra.params)
    exe = g.instantiate()
    raises_exactly(ClosedError, "cuGraphNodeSetEnabled", exe.set_enabled, extra, False)
    exe.close()
    g.close()


def test_disabled_kernel_node_does_not_run(dev, kernels):
    fn = kernels.function("saxpy")
    x, y = dev.alloc(N, "float32"), dev.alloc(N, "float32")
    x.copy_from(np.ones(N, np.float32))
    y.copy_from(np.full(N, 5, np.float32))
    g = cu.Graph(dev)
    k = g.add_kernel(fn, 1, N, np.float32(2), x, y, np.uint32(N))
    exe = g.instantiate()
    assert exe.is_enabled(k)
    exe.set_enabled(k, False)
    assert not exe.is_enabled(k)
    exe.launch()
    dev.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), np.full(N, 5, np.float32))  # unchanged: the kernel was skipped
    exe.set_enabled(k, True)
    exe.launch()
    dev.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), np.full(N, 7, np.float32))
    raises_exactly(InvalidArgument, "cuGraphNodeSetEnabled", exe.set_enabled, k, "no")
    raises_exactly(InvalidArgument, "cuGraphNodeGetEnabled", exe.is_enabled, "k")
    exe.close()
    raises_exactly(ClosedError, "cuGraphNodeGetEnabled", exe.is_enabled, k)
    g.close()


def test_child_node_graph_is_the_copy(dev):
    child = cu.Graph(dev)
    child.add_empty()
    g = cu.Graph(dev)
    node = g.add_child(child)
    assert isinstance(node, cu.ChildNode) and node.kind == "child"
    copy = node.child
    assert copy.node_count == 1 and copy.handle != child.handle
    (listed,) = g.nodes()
    assert isinstance(listed, cu.ChildNode) and listed.child.handle == copy.handle
    g.close()
    raises_exactly(ClosedError, "cuGraphGetNodes", copy.nodes)  # it went with its graph
    child.close()


def test_from_handle_borrows(dev):
    g = cu.Graph(dev)
    a = g.add_empty()
    view = cu.Graph.from_handle(g.handle, dev)
    assert view.nodes() == [a]
    b = view.add_empty(after=a)  # a node of the same graph, through either object
    assert g.node_count == 2 and (a, b) in g.edges()
    view.close()  # never destroys the graph
    assert g.node_count == 2
    raises_exactly(InvalidArgument, "Graph.from_handle", cu.Graph.from_handle, "g", dev)
    raises_exactly(InvalidArgument, "Graph.from_handle", cu.Graph.from_handle, 0, dev)
    g.close()


def test_dot_flags_and_path(dev, tmp_path):
    g = cu.Graph(dev)
    g.add_empty()
    path = tmp_path / "g.dot"
    text = g.dot(flags=1, path=path)
    assert path.read_text() == text and "digraph" in text
    raises_exactly(InvalidArgument, "cuGraphDebugDotPrint", g.dot, flags=-1)
    g.close()


def test_shared_condition_and_branches(dev):
    g = cu.Graph(dev)
    cond = g.create_condition(1)
    assert isinstance(cond, int) and cond
    either = g.add_conditional("if", condition=cond, branches=2)
    assert either.handle == cond and len(either.bodies) == 2 and either.body is either.bodies[0]
    cases = g.add_conditional("switch", condition=g.create_condition(None), branches=3, after=either)
    assert len(cases.bodies) == 3
    raises_exactly(InvalidArgument, "cuGraphInstantiate", cases.bodies[2].instantiate)
    raises_exactly(InvalidArgument, "cuGraphAddNode", g.add_conditional, "while", branches=2)
    raises_exactly(InvalidArgument, "cuGraphAddNode", g.add_conditional, "if", 1, condition=g.create_condition())
    raises_exactly(InvalidArgument, "cuGraphAddNode", g.add_conditional, "if", condition="c")
    raises_exactly(InvalidArgument, "cuGraphConditionalHandleCreate", g.create_condition, -1)
    assert {n.kind for n in g.nodes()} == {"conditional"}
    assert g.node_count == 2
    g.close()


def test_switch_runs_the_case_its_default_names(dev):
    x = dev.alloc(4, "uint32")
    x.copy_from(np.zeros(4, np.uint32))
    g = cu.Graph(dev)
    cond = g.create_condition(1)
    node = g.add_conditional("switch", condition=cond, branches=2)
    node.bodies[0].add_memset(x, 10)
    node.bodies[1].add_memset(x, 11)
    exe = g.instantiate()
    exe.launch()
    dev.synchronize()
    np.testing.assert_array_equal(x.copy_to_host(), np.full(4, 11, np.uint32))
    exe.close()
    g.close()


def test_update_reports_a_typed_result(dev):
    x = dev.alloc(4, "uint32")
    g = cu.Graph(dev)
    g.add_memset(x, 1)
    exe = g.instantiate()
    other = cu.Graph(dev)
    other.add_memset(x, 2)
    other.add_memset(x, 3)
    with pytest.raises(DriverError) as info:
        exe.update(other)
    assert info.value.op == "cuGraphExecUpdate" and info.value.update_result == "topology_changed"
    same = cu.Graph(dev)
    same.add_memset(x, 9)
    keep = [object()]
    exe.update(same, keep=keep)
    assert keep[0] in exe._keep
    exe.launch()
    dev.synchronize()
    np.testing.assert_array_equal(x.copy_to_host(), np.full(4, 9, np.uint32))  # the new memset value is written
    raises_exactly(InvalidArgument, "cuGraphExecUpdate", exe.update, same, keep=3)
    raises_exactly(InvalidArgument, "cuGraphInstantiate", same.instantiate, keep="abc")
    for graph in (exe, g, other, same):
        graph.close()


def test_capture_info_and_dependencies(dev):
    s = dev.create_stream()
    assert s.capture_info() == cu.CaptureInfo("none", None, [])
    s.begin_capture()
    info = s.capture_info()
    assert info.status == "active" and isinstance(info.graph, cu.Graph)
    assert s.capture_info().graph is info.graph  # one object for the capture's graph
    raises_exactly(InvalidArgument, "cuStreamUpdateCaptureDependencies", s.update_capture_dependencies, ["n"])
    s.update_capture_dependencies([])
    graph = s.end_capture()
    assert graph is info.graph
    raises_exactly(InvalidArgument, "cuStreamUpdateCaptureDependencies", s.update_capture_dependencies, [])
    graph.close()
    s.close()


@pytest.mark.skipif(FAKE, reason="the fake driver captures into its own capture graphs only")
def test_capture_into_an_existing_graph_after_its_nodes(dev, kernels):
    fn = kernels.function("saxpy")
    x, y = dev.alloc(N, "float32"), dev.alloc(N, "float32")
    x.copy_from(np.ones(N, np.float32))
    g = cu.Graph(dev)
    zero = g.add_memset(y, 0)
    s = dev.create_stream()
    s.begin_capture(graph=g, after=[zero])
    fn.launch(1, N, np.float32(3), x, y, np.uint32(N), stream=s)
    info = s.capture_info()
    assert info.graph is g and len(info.dependencies) == 1 and info.dependencies[0].kind == "kernel"
    mark = g.add_empty(after=info.dependencies)
    s.update_capture_dependencies([mark])
    assert s.capture_info().dependencies == [mark]
    assert s.end_capture() is g
    assert {n.kind for n in g.nodes()} == {"memset", "kernel", "empty"}
    exe = g.instantiate()
    exe.launch(s)
    s.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), np.full(N, 3, np.float32))
    exe.close()
    g.close()
    s.close()


def test_dependencies_must_be_nodes_of_the_graph(dev):
    s = dev.create_stream()
    g, other = cu.Graph(dev), cu.Graph(dev)
    foreign = other.add_empty()
    raises_exactly(InvalidArgument, "cuStreamBeginCaptureToGraph", s.begin_capture, graph=g, after=[foreign])
    raises_exactly(InvalidArgument, "cuStreamBeginCaptureToGraph", s.begin_capture, graph="g")
    raises_exactly(InvalidArgument, "cuStreamBeginCapture", s.begin_capture, after=[foreign])
    assert s.capture_status == "none"
    g.close()
    other.close()
    s.close()


def test_handles_are_driver_handles(dev):
    g = cu.Graph(dev)
    node = g.add_empty()
    assert ctypes.c_void_p(node.node_handle).value == node.node_handle
    assert g.node(node.node_handle) is not node and g.node(node.node_handle) == node and hash(g.node(node.node_handle)) == hash(node)
    g.close()
