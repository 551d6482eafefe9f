"""Graphs: instantiate flags, what an updated executable graph holds, C host functions (hostfn.launch_c)."""

from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
import pytest
from helpers import FAKE

import ironaccel_cuda as cu
from ironaccel import ClosedError, DriverError, InvalidArgument
from ironaccel_cuda import hostfn

pytestmark = pytest.mark.backend("cuda")


def test_instantiate_flags_give_working_graphs(dev, kernels):
    s = dev.create_stream()
    fn = kernels.function("saxpy")
    n = 1000
    x = np.arange(n, dtype=np.float32)
    dx, dy = dev.alloc(n, "float32", stream=s), dev.alloc(n, "float32", stream=s)
    dx.copy_from(x, stream=s)
    s.synchronize()
    s.begin_capture()
    dy.memset(0, stream=s)
    fn.launch((n + 255) // 256, 256, 3.0, dx, dy, n, stream=s)
    graph = s.end_capture()
    for flags in ({"auto_free_on_launch": True}, {"use_node_priority": True},
                  {"auto_free_on_launch": True, "use_node_priority": True}):
        exe = graph.instantiate(**flags)
        dy.memset(0xFF, stream=s)
        exe.launch(s)
        s.synchronize()
        np.testing.assert_allclose(dy.copy_to_host(), 3 * x)
        exe.close()
    graph.close()
    dx.close()
    dy.close()
    s.close()


@pytest.mark.skipif(FAKE, reason="the fake driver has no explicit graphs (host nodes)")
def test_an_updated_graph_holds_the_new_host_funcs_not_the_old(dev):
    calls: list[str] = []

    def old() -> None:
        calls.append("old")

    def new() -> None:
        calls.append("new")

    old_ref, new_ref = weakref.ref(old), weakref.ref(new)
    first = cu.Graph(dev)
    first.add_host_func(old)
    exe = first.instantiate()
    second = cu.Graph(dev)
    second.add_host_func(new)
    del old, new
    exe.update(second)
    first.close()
    second.close()
    del first, second
    gc.collect()
    assert old_ref() is None  # nothing holds the replaced host function any more
    assert new_ref() is not None  # the executable graph holds the one it runs now
    s = dev.create_stream()
    exe.launch(s)
    s.synchronize()
    assert calls == ["new"]

    mismatched = cu.Graph(dev)
    mismatched.add_host_func(lambda: calls.append("rejected"))
    mismatched.add_empty()
    with pytest.raises(DriverError):
        exe.update(mismatched)  # another topology: rejected, and the exec keeps what it had
    mismatched.close()
    del mismatched
    gc.collect()
    assert new_ref() is not None
    exe.launch(s)
    s.synchronize()
    assert calls == ["new", "new"]
    exe.close()
    s.close()


def test_launch_c_runs_a_c_function_with_its_data(dev):
    seen: list[int] = []
    callback_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    read = callback_type(lambda data: seen.append(ctypes.cast(data, ctypes.POINTER(ctypes.c_uint32))[0]))
    value = ctypes.c_uint32(0xC0FFEE)
    s = dev.create_stream()
    hostfn.launch_c(s, ctypes.cast(read, ctypes.c_void_p).value, ctypes.addressof(value))
    s.synchronize()
    assert seen == [0xC0FFEE]
    for address, data in ((0, 0), (True, 0), ("fn", 0), (ctypes.cast(read, ctypes.c_void_p).value, -1)):
        with pytest.raises(InvalidArgument, match="cuLaunchHostFunc"):
            hostfn.launch_c(s, address, data)
    s.close()
    with pytest.raises(ClosedError, match="cuLaunchHostFunc"):
        hostfn.launch_c(s, ctypes.cast(read, ctypes.c_void_p).value, 0)


def test_launch_kept_runs_while_its_host_func_is_held(dev):
    calls: list[int] = []
    s = dev.create_stream()
    entry = hostfn.launch_kept(s, lambda: calls.append(1))
    s.synchronize()
    assert calls == [1] and isinstance(entry, hostfn.HostFunc)
    with pytest.raises(InvalidArgument, match="callable"):
        hostfn.launch_kept(s, "not callable")
    s.close()


def test_a_refused_update_says_why(dev, kernels):
    s = dev.create_stream()
    fn = kernels.function("saxpy")
    n = 256
    dx, dy = dev.alloc(n, "float32", stream=s), dev.alloc(n, "float32", stream=s)
    graphs = []
    for count in (1, 2):
        s.begin_capture()
        for _ in range(count):
            fn.launch(1, n, 1.0, dx, dy, n, stream=s)
        graphs.append(s.end_capture())
    exe = graphs[0].instantiate()
    with pytest.raises(DriverError, match="CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED") as info:
        exe.update(graphs[1])
    assert info.value.op == "cuGraphExecUpdate" and info.value.code_name == "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"
    exe.update(graphs[0])  # the refused update changed nothing: the same topology still updates
    exe.close()
    for g in graphs:
        g.close()
    dx.close()
    dy.close()
    s.close()
