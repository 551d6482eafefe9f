"""The cuda.core compat's explicit graphs: GraphDefinition, its nodes, conditionals, Graph[node] and updates.

Results are read back from device memory after real launches; identities, edges and released attachments
are checked through the objects cuda.core's API gives back.
"""

from __future__ import annotations

import ctypes
import gc
import struct
import weakref

import pytest
from helpers.kernels import SOURCE

pytestmark = pytest.mark.backend("cuda")

N = 64


@pytest.fixture
def module(cc, device):
    return cc.Program(SOURCE, "c++", cc.ProgramOptions(std="c++17")).compile("cubin")


def read(ptr: int, nbytes: int) -> bytes:
    from cuda.bindings import driver

    out = (ctypes.c_ubyte * nbytes)()
    (err,) = driver.cuMemcpyDtoH(out, ptr, nbytes)
    assert not err, err
    return bytes(out)


def floats(ptr: int, n: int) -> list[float]:
    return list(struct.unpack(f"{n}f", read(ptr, 4 * n)))


def test_topology_and_identity(cc, device):
    g = cc.graph.GraphDefinition()
    a = g.empty()
    b = a.join()
    c = g.empty()
    d = g.join(b, c)
    assert isinstance(d, cc.graph.EmptyNode) and d.type.name == "CU_GRAPH_NODE_TYPE_EMPTY"
    assert g.nodes() == {a, b, c, d}
    assert all(any(n is x for x in g.nodes()) for n in (a, b, c, d))
    assert g.edges() == {(a, b), (b, d), (c, d)}
    assert set(d.pred) == {b, c} and set(a.succ) == {b}
    (back,) = b.pred
    assert back is a and b.graph == g
    c.succ = {a}
    assert set(a.pred) == {c}
    a.pred.discard(c)
    assert a.pred == set()
    d.destroy()
    assert not d.is_valid and d.handle is None and d.type is None and d.pred == set()
    assert g.nodes() == {a, b, c} and g.edges() == {(a, b)}
    d.destroy()


def test_memset_memcpy_alloc_free_run(cc, device, stream):
    out = cc.DeviceMemoryResource(device).allocate(256, stream=stream)
    stream.sync()
    g = cc.graph.GraphDefinition()
    src = g.allocate(256)
    assert src.dptr and (src.bytesize, src.device_id, src.memory_type, src.peer_access) == (
        256, device.device_id, "device", ())
    fill = src.memset(src.dptr, b"\x01\x02\x03\x04", 64)
    assert (fill.dptr, fill.value, fill.element_size, fill.width, fill.height) == (src.dptr, 0x04030201, 4, 64, 1)
    copy = fill.memcpy(out, src.dptr, 256)
    assert (copy.dst, copy.src, copy.size) == (int(out.handle), src.dptr, 256)
    free = copy.deallocate(src.dptr)
    assert free.dptr == src.dptr and set(free.pred) == {copy}
    assert [type(n).__name__ for n in (src, fill, copy, free)] == ["AllocNode", "MemsetNode", "MemcpyNode", "FreeNode"]
    graph = g.instantiate(cc.graph.GraphCompleteOptions(upload_stream=stream))
    graph.launch(stream)
    graph.launch(stream)  # every allocation is freed in the graph, so it can run again
    stream.sync()
    assert read(int(out.handle), 256) == b"\x01\x02\x03\x04" * 64
    graph.close()
    out.close(stream)


def test_kernel_node_and_its_executable_view(cc, device, stream, module):
    kernel = module.get_kernel("scale_offset")
    mr = cc.DeviceMemoryResource(device)
    xbuf, ybuf = mr.allocate(4 * N, stream=stream), mr.allocate(4 * N, stream=stream)
    stream.sync()
    x, y = int(xbuf.handle), int(ybuf.handle)
    g = cc.graph.GraphDefinition()
    ones = g.memset(xbuf, struct.pack("f", 1.0), N)
    config = cc.LaunchConfig(grid=1, block=N)
    node = ones.launch(config, kernel, x, ybuf, 2.0, 3.0, N)
    assert isinstance(node, cc.graph.KernelNode)
    assert (node.grid, node.block, node.shmem_size) == ((1, 1, 1), (N, 1, 1), 0)
    assert node.kernel is kernel and set(node.pred) == {ones} and node.config == config
    graph = g.instantiate()
    graph.launch(stream)
    stream.sync()
    assert floats(y, N) == [5.0] * N
    view = graph[node]
    assert isinstance(view, cc.graph.ExecutableKernelNode) and view.is_enabled
    view.update(config=config, kernel=kernel, args=(x, y, 3.0, 4.0, N))
    graph.launch(stream)
    stream.sync()
    assert floats(y, N) == [7.0] * N
    view.disable()
    assert not view.is_enabled
    graph[ones].update(dst=x, value=struct.pack("f", 2.0), width=N)
    graph.launch(stream)
    stream.sync()
    assert floats(x, N) == [2.0] * N and floats(y, N) == [7.0] * N  # the disabled kernel did not run
    with pytest.raises(TypeError):
        graph[g.empty()]  # an EmptyNode has no executable view
    graph.close()
    xbuf.close(stream)
    ybuf.close(stream)


def test_host_callbacks(cc, device, stream):
    calls = []
    g = cc.graph.GraphDefinition()
    first = g.callback(lambda: calls.append("python"))
    assert isinstance(first, cc.graph.HostCallbackNode) and first.callback is not None

    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    seen = []

    @proto
    def raw(data):
        seen.append(ctypes.cast(data, ctypes.POINTER(ctypes.c_uint8))[0])

    second = first.join().callback(raw, user_data=bytes([0xAB]))  # a HostCallbackNode's `callback` is its callable
    assert second.callback is None
    with pytest.raises(ValueError, match="user_data is only supported"):
        g.callback(lambda: None, user_data=b"x")
    with pytest.raises(TypeError):
        g.callback(ctypes.CFUNCTYPE(ctypes.c_int)(lambda: 0))
    graph = g.instantiate()
    graph.launch(stream)
    graph.launch(stream)
    stream.sync()
    assert calls == ["python", "python"] and seen == [0xAB, 0xAB]


def test_conditionals_choose_their_branch(cc, device, stream):
    mr = cc.DeviceMemoryResource(device)
    buf = mr.allocate(16, stream=stream)
    stream.sync()
    ptr = int(buf.handle)
    g = cc.graph.GraphDefinition()
    zero = g.memset(ptr, 0, 16)
    off = g.create_condition(default_value=0)  # one condition per conditional node, as the driver wants
    pick = g.create_condition(default_value=2)
    never = g.create_condition(default_value=0)
    once = g.create_condition(default_value=1)
    both = zero.if_else(off)
    assert isinstance(both, cc.graph.IfElseNode) and both.cond_type == "if" and both.condition == off
    both.then.memset(ptr, 0x11, 4)
    both.else_.memset(ptr, 0x22, 4)
    switch = both.switch(pick, 3)
    assert switch.cond_type == "switch" and len(switch.branches) == 3
    for i, branch in enumerate(switch.branches):
        branch.memset(ptr + 4, 0x30 + i, 4)
    loop = switch.while_loop(never)
    loop.body.memset(ptr + 8, 0x44, 4)
    only = loop.if_then(once)
    only.then.memset(ptr + 12, 0x55, 4)
    assert {type(n) for n in g.nodes()} >= {cc.graph.IfElseNode, cc.graph.SwitchNode, cc.graph.WhileNode,
                                            cc.graph.IfNode}
    graph = g.instantiate()
    graph.launch(stream)
    stream.sync()
    assert read(ptr, 16) == b"\x22" * 4 + b"\x32" * 4 + b"\x00" * 4 + b"\x55" * 4
    with pytest.raises(TypeError):
        g.if_then(object())
    with pytest.raises(cc._utils.cuda_utils.CUDAError):
        cc.graph.GraphDefinition().if_then(off)  # a condition of another graph
    graph.close()
    buf.close(stream)


def test_child_graphs_and_graph_update(cc, device, stream):
    mr = cc.DeviceMemoryResource(device)
    buf = mr.allocate(8, stream=stream)
    stream.sync()
    ptr = int(buf.handle)

    def definition(value: int):
        child = cc.graph.GraphDefinition()
        child.memset(ptr, value, 8)
        g = cc.graph.GraphDefinition()
        node = g.embed(child)
        assert len(node.child_graph.nodes()) == 1 and node.child_graph != child
        return g, node

    g1, node1 = definition(0x0A)
    graph = g1.instantiate()
    graph.launch(stream)
    stream.sync()
    assert read(ptr, 8) == b"\x0a" * 8
    g2, _ = definition(0x0B)
    graph.update(g2)
    graph.launch(stream)
    stream.sync()
    assert read(ptr, 8) == b"\x0b" * 8
    replacement = cc.graph.GraphDefinition()
    replacement.memset(ptr, 0x0C, 8)
    graph[node1].update(replacement)
    graph.launch(stream)
    stream.sync()
    assert read(ptr, 8) == b"\x0c" * 8
    bigger = cc.graph.GraphDefinition()
    bigger.empty()
    bigger.empty()
    with pytest.raises(cc._utils.cuda_utils.CUDAError, match="Graph update failed"):
        graph.update(bigger)
    graph.close()
    buf.close(stream)


def test_attachments_follow_their_nodes(cc, device, wait_until):
    def callback():
        pass

    ref = weakref.ref(callback)
    g = cc.graph.GraphDefinition()
    node = g.callback(callback)
    del callback
    gc.collect()
    assert ref() is not None  # the graph holds it
    node.destroy()
    wait_until(lambda: ref() is None)  # released by the driver (a user object), then on the main thread

    def inner_callback():
        pass

    ref = weakref.ref(inner_callback)
    inner = cc.graph.GraphDefinition()
    inner.callback(inner_callback)
    outer = cc.graph.GraphDefinition()
    child = outer.embed(inner)
    embedded = child.child_graph
    del inner, inner_callback
    gc.collect()
    assert ref() is not None  # the embedded copy holds it
    (copied,) = embedded.nodes()
    child.destroy()
    wait_until(lambda: ref() is None)
    assert int(embedded.handle) == 0 and not copied.is_valid


def test_argument_errors(cc, device):
    g = cc.graph.GraphDefinition()
    with pytest.raises(ValueError, match="'shared' is not a valid GraphMemoryType"):
        g.allocate(16, memory_type="shared")
    with pytest.raises(ValueError, match="1, 2 or 4 bytes"):
        g.memset(0x1000, b"\x00\x01\x02", 4)
    with pytest.raises(TypeError, match="expected a GraphNode"):
        g.empty().succ.add("node")
    a = g.empty()
    with pytest.raises(cc._utils.cuda_utils.CUDAError):
        a.succ.add(cc.graph.GraphDefinition().empty())  # another graph's node
    a.destroy()
    with pytest.raises(cc._utils.cuda_utils.CUDAError):
        g.empty().succ.add(a)  # a destroyed node
    with pytest.raises(TypeError, match="options must be a GraphDebugPrintOptions"):
        g.debug_dot_print("/dev/null", "verbose")


def test_definition_nodes_take_new_parameters(cc, device, stream, module):
    kernel = module.get_kernel("scale_offset")
    mr = cc.DeviceMemoryResource(device)
    xbuf, ybuf = mr.allocate(4 * N, stream=stream), mr.allocate(4 * N, stream=stream)
    stream.sync()
    x, y = int(xbuf.handle), int(ybuf.handle)
    calls = []
    g = cc.graph.GraphDefinition()
    fill = g.memset(xbuf, struct.pack("f", 1.0), N)
    config = cc.LaunchConfig(grid=1, block=N)
    node = fill.launch(config, kernel, x, y, 2.0, 3.0, N)
    host = node.callback(lambda: calls.append("old"))
    fill.update(value=struct.pack("f", 3.0))
    assert (fill.value, fill.element_size, fill.width) == (struct.unpack("<I", struct.pack("f", 3.0))[0], 4, N)
    node.update(args=(x, y, 1.0, 1.0, N))
    host.update(lambda: calls.append("new"))
    with pytest.raises(ValueError, match="needs its args"):
        node.update(kernel=kernel)
    graph = g.instantiate()
    graph.launch(stream)
    stream.sync()
    assert floats(y, N) == [4.0] * N and calls == ["new"]
    graph.close()
    xbuf.close(stream)
    ybuf.close(stream)


def test_reprs_are_cuda_cores(cc, device, stream, module):
    """repr of streams, launch configs and every node type in cuda.core 1.2's format (its test_object_protocols)."""
    import re

    ctx = int(stream.context.handle)
    assert repr(stream) == f"<Stream handle={int(stream.handle):#x} context={ctx:#x}>"
    config = cc.LaunchConfig(grid=(1,), block=(1,))
    assert repr(config) == ("LaunchConfig(grid=(1, 1, 1), cluster=None, block=(1, 1, 1), shmem_size=0, "
                            "is_cooperative=False)")
    assert weakref.ref(config)() is config
    out = cc.DeviceMemoryResource(device).allocate(64, stream=stream)
    stream.sync()
    g = cc.graph.GraphDefinition()
    alloc = g.allocate(64)
    fill = alloc.memset(alloc.dptr, 7, 64)
    copy = fill.memcpy(out, alloc.dptr, 64)
    free = copy.deallocate(alloc.dptr)
    event = device.create_event()
    record, wait = free.record(event), free.wait(event)
    kernel = g.launch(cc.LaunchConfig(grid=1, block=N), module.get_kernel("scale_offset"), int(out.handle),
                      int(out.handle), 1.0, 0.0, 0)

    def on_host():
        pass

    host = g.callback(on_host)
    child = g.embed(cc.graph.GraphDefinition())
    cond = g.create_condition()
    branch = g.if_then(cond)
    h = "0x[0-9a-f]+"
    expect = {
        alloc: rf"<AllocNode handle={h} dptr={alloc.dptr:#x} size=64>",
        fill: rf"<MemsetNode handle={h} dptr={alloc.dptr:#x} value=7>",
        copy: rf"<MemcpyNode handle={h} dst={int(out.handle):#x}\(D\) src={alloc.dptr:#x}\(D\) size=64>",
        free: rf"<FreeNode handle={h} dptr={alloc.dptr:#x}>",
        record: rf"<EventRecordNode handle={h} event={int(event.handle):#x}>",
        wait: rf"<EventWaitNode handle={h} event={int(event.handle):#x}>",
        kernel: rf"<KernelNode handle={h} kernel={h}>",
        host: rf"<HostCallbackNode handle={h} callback=on_host>",
        child: rf"<ChildGraphNode handle={h} child={h}>",
        branch: rf"<IfNode handle={h} condition={int(cond.handle):#x}>",
    }
    for node, pattern in expect.items():
        assert re.fullmatch(pattern, repr(node)), (repr(node), pattern)
    assert repr(g.empty()).startswith("<EmptyNode handle=0x")
    event.close()
    out.close(stream)
