"""The cuda.core compat's GraphBuilder on a device: conditional bodies, nesting, embed, callbacks, options.

Conditions here take their values from `create_condition(default_value=...)`, so the kernels
need no device runtime.  The fake driver records conditional and child nodes without running
them: under it only the parent graph's own kernels run.
"""

from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
import pytest
from conftest import FAKE
from helpers.kernels import NAME_EXPRESSIONS, SOURCE

pytestmark = pytest.mark.backend("cuda")

N = 64


@pytest.fixture
def saxpy(cc, device):
    program = cc.Program(SOURCE, "c++", cc.ProgramOptions(std="c++17"))
    return program.compile("cubin", name_expressions=tuple(NAME_EXPRESSIONS)).get_kernel("saxpy")


def test_conditional_bodies_nesting_and_embed(cc, device, stream, saxpy):
    x = np.arange(N, dtype=np.float32)
    host = cc.LegacyPinnedMemoryResource().allocate(N * 4)
    view = np.from_dlpack(host).view(np.float32)
    view[:] = x
    dx, dy = (device.allocate(N * 4, stream=stream) for _ in range(2))
    dx.copy_from(host, stream=stream)
    dy.fill(0, stream=stream)
    stream.sync()
    config = cc.LaunchConfig(grid=(N + 31) // 32, block=32)

    def add(builder, a):  # dy += a * dx
        cc.launch(builder, config, saxpy, np.float32(a), dx, dy, np.uint32(N))

    child = device.create_graph_builder().begin_building()
    add(child, 16)
    gb = device.create_graph_builder().begin_building()
    with pytest.raises(ValueError, match="^Child graph has not finished building."):
        gb.embed(child)
    child.end_building()

    yes, no, third = (gb.create_condition(default_value=v) for v in (1, 0, 2))
    assert yes != no and isinstance(yes, type(no))
    body = gb.if_then(yes)
    assert not body.is_join_required and not body.is_building
    body.begin_building()
    add(body, 1)
    inner_condition = body.create_condition(default_value=True)
    inner = body.if_then(inner_condition).begin_building()
    add(inner, 8)
    inner.end_building()
    body.end_building()

    then_branch, else_branch = gb.if_else(no)
    for branch, a in ((then_branch, 1000), (else_branch, 2)):
        branch.begin_building()
        add(branch, a)
        branch.end_building()
    cases = gb.switch(third, 3)
    assert len(cases) == 3
    for case, a in zip(cases, (100, 200, 4)):
        case.begin_building()
        add(case, a)
        case.end_building()
    # A conditional handle belongs to one conditional node (the driver refuses a second with INVALID_VALUE).
    stop = gb.create_condition(default_value=0)
    loop = gb.while_loop(stop).begin_building()  # the condition starts at 0: the body never runs
    add(loop, 10000)
    loop.end_building()
    gb.embed(child)
    add(gb, 32)
    with pytest.raises(TypeError, match="GraphCondition"):
        gb.if_then(1)
    graph = gb.end_building().complete(cc.graph.GraphCompleteOptions(auto_free_on_launch=True, upload_stream=stream))
    with pytest.raises(RuntimeError, match="Cannot create a condition when graph is not being built"):
        gb.create_condition()
    with pytest.raises(RuntimeError, match="Cannot add conditional node when not actively capturing"):
        gb.if_then(yes)
    with pytest.raises(ValueError, match="^Parent graph is not being built."):
        gb.embed(child)

    graph.launch(stream)
    dy.copy_to(host, stream=stream)
    stream.sync()
    expected = 32 if FAKE else 1 + 8 + 2 + 4 + 16 + 32  # the fake runs no conditional or child node
    np.testing.assert_array_equal(view, expected * x)
    graph.close()
    for b in (gb, child, body, inner, then_branch, else_branch, loop, *cases):
        b.close()
        b.close()
    for b in (dx, dy):
        b.close(stream)
    host.close()


@pytest.mark.skipif(FAKE, reason="the fake driver does not capture host functions into graphs")
def test_callbacks_are_held_by_the_graph(cc, device, stream, wait_until):
    calls: list[str] = []
    read: list[int] = []

    def python_callback() -> None:
        calls.append("python")

    callback_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    c_callback = callback_type(lambda data: read.append(ctypes.cast(data, ctypes.POINTER(ctypes.c_uint8))[1]))
    python_ref, c_ref = weakref.ref(python_callback), weakref.ref(c_callback)
    gb = stream.create_graph_builder().begin_building()
    with pytest.raises(ValueError, match="user_data is only supported with ctypes function pointers"):
        gb.callback(python_callback, user_data=b"x")
    gb.callback(python_callback)
    payload = bytearray(b"\x01\xab")
    gb.callback(c_callback, user_data=payload)
    payload[1] = 0  # the graph has its own copy
    # (No callback inside a conditional body: the driver allows no host nodes there, and refuses the graph at
    # instantiation with INVALID_VALUE, H200 driver 580.)
    graph = gb.end_building().complete()
    gb.close()
    del python_callback, c_callback, gb
    gc.collect()
    assert python_ref() is not None and c_ref() is not None
    graph.launch(stream)
    graph.launch(stream)
    stream.sync()
    assert calls == ["python", "python"] and read == [0xAB, 0xAB]
    graph.close()
    del graph
    # the executable graph held them through a CUDA user object too: released by the driver, then here
    wait_until(lambda: python_ref() is None and c_ref() is None)


@pytest.mark.skipif(FAKE, reason="the fake driver does not capture host functions into graphs")
def test_a_captured_callback_is_held_per_node_through_embedded_copies(cc, device, stream, wait_until):
    """A builder's captured callback belongs to its host node: an embedded copy keeps it after the child builder
    is gone, the parent's launches run it, and destroying the copy's node releases it."""
    from ironaccel_cuda_compat.cuda_core.graph import ChildGraphNode, HostCallbackNode

    calls: list[int] = []

    def callback() -> None:
        calls.append(1)

    ref = weakref.ref(callback)
    child = device.create_graph_builder().begin_building()
    child.callback(callback)
    child.end_building()
    parent = device.create_graph_builder().begin_building()
    parent.embed(child)
    parent.end_building()
    graph = parent.complete()
    del callback
    child.close()
    del child
    gc.collect()
    assert ref() is not None
    graph.launch(stream)
    stream.sync()
    assert calls == [1]
    graph.close()
    del graph
    definition = parent.graph_definition
    node = next(n for n in definition.nodes() if isinstance(n, ChildGraphNode))
    copy = next(n for n in node.child_graph.nodes() if isinstance(n, HostCallbackNode))
    gc.collect()
    assert ref() is not None  # the parent's copy still holds it
    copy.destroy()
    del copy, node
    wait_until(lambda: ref() is None)
    parent.close()


@pytest.mark.skipif(FAKE, reason="the fake driver does not capture host functions into graphs")
def test_a_captured_callback_failure_goes_to_the_launching_stream(cc, device, stream, monkeypatch):
    """Held per node, a captured callback still reports a failure to the stream that launched its graph."""
    import sys

    from ironaccel_cuda import hostfn

    seen: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)

    def fails() -> None:
        raise KeyError("from the callback")

    gb = device.create_graph_builder().begin_building()
    gb.callback(fails)
    graph = gb.end_building().complete()
    other = device.create_stream()
    graph.launch(other)
    other.sync()  # cuda.core's sync raises nothing for a callback; the failure is kept for the launching stream
    errors = hostfn.pending_errors(other)
    assert len(errors) == 1 and isinstance(errors[0].__cause__, KeyError)
    assert len(seen) == 1
    graph.close()
    gb.close()
    other.close()
