"""Bad input to the core ironaccel-cuda API (outside the compat surfaces) gets a typed error naming the call.

Each case here once let something else out: a TypeError from hashing an
unhashable choice ("unhashable type: 'list'"), an OverflowError from the
binding for an int too wide for its C type, an AttributeError or a
ZeroDivisionError from inside, a dangling graph handle reaching the driver,
or a half-checked IPC descriptor.  Each now raises InvalidArgument (or
ClosedError) with the operation's name in `op` and in the message, before
any driver call, and leaves nothing behind (no node, stream, context push or
IPC import).  Every check runs before the driver is asked, so the cases hold
on a real GPU as on the fake driver.
"""

from __future__ import annotations

import dataclasses
import pickle
import socket

import numpy as np
import pytest
from expect import raises_exactly
from kernels import NAME_EXPRESSIONS, SOURCE

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")


@pytest.fixture(scope="module")
def fn():
    import ironaccel_cuda as cu

    dev = cu.Device(0)
    code = cu.Program(SOURCE, name_expressions=NAME_EXPRESSIONS).compile("cubin", arch=dev)
    mod = dev.load_module(code)
    yield mod.function("saxpy")
    mod.close()
    dev.close()


# -- choices given as unhashable objects: once TypeError("unhashable type") -------------------------------


def test_unhashable_choices(dev):
    raises_exactly(InvalidArgument, "cuCtxSetCacheConfig", dev.set_cache_config, [])
    raises_exactly(InvalidArgument, "cuCtxCreate", dev.create_context, [])
    s = dev.create_stream()
    raises_exactly(InvalidArgument, "cuStreamBeginCapture", s.begin_capture, [])
    assert not s.is_capturing
    g = cu.Graph(dev)
    raises_exactly(InvalidArgument, "cuGraphAddNode", g.add_conditional, ["if"])
    assert g.node_count == 0
    pool = dev.create_driver_pool()
    raises_exactly(InvalidArgument, "cuMemPoolSetAccess", pool.grant_access, 0, [])
    vb = dev.reserve(1 << 21)
    raises_exactly(InvalidArgument, "cuMemSetAccess", vb.grant_access, 0, {})
    raises_exactly(InvalidArgument, "cuMemcpyBatchAsync", cu.CopyAttributes, src_access=[])
    vb.close()
    g.close()
    s.close()


def test_unhashable_managed_choices(dev):
    if not dev.attributes.managed_memory:
        pytest.skip("no managed memory on this device")
    m = cu.ManagedAllocator(dev)
    buf = m.allocate(1024)
    s = dev.create_stream()
    raises_exactly(InvalidArgument, "cuMemAdvise", cu.advise, buf, ["read_mostly"])
    raises_exactly(InvalidArgument, "cuStreamAttachMemAsync", cu.attach, buf, s, [])
    buf.close()
    s.close()


# -- ints too wide for the driver's C type: once OverflowError from the binding -------------------------


def test_stream_priority_out_of_int32(dev):
    for priority in (1 << 31, -(1 << 31) - 1, 1 << 70):
        raises_exactly(InvalidArgument, "cuStreamCreateWithPriority", dev.create_stream, priority)
    ctx = dev.create_context()
    before = cu.current_context()
    raises_exactly(InvalidArgument, "cuStreamCreateWithPriority", ctx.create_stream, 1 << 40)
    assert cu.current_context() is before  # nothing pushed and left behind
    ctx.close()


def test_split_sms_too_many_groups(dev):
    total = dev.attributes.multiprocessor_count
    err = raises_exactly(InvalidArgument, "cuDevSmResourceSplitByCount", dev.split_sms, 1, 1 << 40)
    assert f"{total} SMs" in str(err)
    raises_exactly(InvalidArgument, "cuDevSmResourceSplitByCount", dev.split_sms, 1, total + 1)


def test_pool_trim_past_64_bits(dev):
    pool = dev.create_driver_pool()
    raises_exactly(InvalidArgument, "cuMemPoolTrimTo", pool.trim, 1 << 64)
    pool.trim(0)  # still usable
    pool.close()


def test_stream_from_handle_past_64_bits(dev):
    raises_exactly(InvalidArgument, "Stream.from_handle", cu.Stream.from_handle, 1 << 64, dev)


def test_graph_kernel_grid_int_checked(dev, fn):
    x, y = dev.alloc(16, "float32"), dev.alloc(16, "float32")
    args = (np.float32(1), x, y, np.uint32(16))
    g = cu.Graph(dev)
    for grid in (1 << 32, 1 << 40, 0, -1):
        err = raises_exactly(InvalidArgument, "cuGraphAddKernelNode", g.add_kernel, fn, grid, 32, *args)
        assert "below 2**32" in str(err)
    raises_exactly(InvalidArgument, "cuGraphAddKernelNode", g.add_kernel, fn, 1, 1 << 32, *args)
    assert g.node_count == 0
    k = g.add_kernel(fn, 1, 32, *args)
    exe = g.instantiate()
    raises_exactly(InvalidArgument, "cuGraphExecKernelNodeSetParams", exe.set_params, k, fn, 1 << 40, 32, *args)
    exe.close()
    g.close()
    x.close()
    y.close()


def test_occupancy_dims_checked(fn):
    # once an OverflowError from the binding, and a ZeroDivisionError for a zero cluster
    raises_exactly(InvalidArgument, "cuOccupancyMaxPotentialClusterSize", fn.max_potential_cluster_size, 1 << 40, 32)
    raises_exactly(InvalidArgument, "cuOccupancyMaxActiveClusters", fn.max_active_clusters, 4, 32, 0)
    raises_exactly(InvalidArgument, "cuOccupancyMaxActiveClusters", fn.max_active_clusters, 4, 32, -2)


# -- not a Device: once AttributeError("'str' object has no attribute '_check_open'") ---------------------


@pytest.mark.parametrize("make, op", [
    (lambda d: cu.DirectAllocator(d), "DirectAllocator"),
    (lambda d: cu.VirtualAllocator(d), "VirtualAllocator"),
    (lambda d: cu.ManagedAllocator(d), "ManagedAllocator"),
    (lambda d: cu.MemPool(d), "MemPool"),
    (lambda d: cu.ExternalAllocator(d, lambda n, s: 0, lambda p, n, s: None), "ExternalAllocator"),
    (lambda d: cu.Stream.from_handle(0, d), "Stream.from_handle"),
])
def test_device_argument_must_be_a_device(make, op):
    for bad in ("cuda:0", 0, None):
        raises_exactly(InvalidArgument, op, make, bad)


def test_closed_device_argument(dev):
    other = cu.Device(0)
    other.close()
    raises_exactly(ClosedError, "DirectAllocator", cu.DirectAllocator, other)
    raises_exactly(ClosedError, "MemPool", cu.MemPool, other)


# -- graphs -----------------------------------------------------------------------------------------


def test_update_from_body_of_closed_graph(dev):
    """A conditional body's handle is destroyed with its parent graph: updating from it is ClosedError, not a
    dangling handle handed to cuGraphExecUpdate."""
    g = cu.Graph(dev)
    g.add_empty()
    exe = g.instantiate()
    parent = cu.Graph(dev)
    body = parent.add_conditional("if").body
    parent.close()
    raises_exactly(ClosedError, "cuGraphExecUpdate", exe.update, body)
    exe.launch()  # the executable is untouched
    dev.synchronize()
    exe.close()
    g.close()


def test_set_params_with_a_node_of_a_closed_graph(dev):
    """A node's handle dies with its graph: set_params on it is ClosedError, not a freed handle handed to
    cuGraphExecMemsetNodeSetParams; the executable keeps its old parameters."""
    buf = dev.alloc(64, "uint8")
    g = cu.Graph(dev)
    node = g.add_memset(buf, 7)
    exe = g.instantiate()
    g.close()
    raises_exactly(ClosedError, "GraphExec.set_params(memset)", exe.set_params, node, buf, 9)
    exe.launch()
    dev.synchronize()
    assert (buf.copy_to_host() == 7).all()
    exe.close()
    buf.close()


# -- programs ----------------------------------------------------------------------------------------


def test_program_name_expressions_not_a_sequence():
    raises_exactly(InvalidArgument, "nvrtcCreateProgram", cu.Program, SOURCE, name_expressions=5)
    # a str would have been taken as one name expression per character
    raises_exactly(InvalidArgument, "nvrtcCreateProgram", cu.Program, SOURCE, name_expressions="saxpy")


# -- IPC ---------------------------------------------------------------------------------------------


def test_ipc_descriptor_offset_checked_before_import(dev):
    """A pool descriptor whose offset is not one export makes: InvalidArgument before anything is imported
    (once an out-of-range pointer, or an OverflowError after the import was counted and never released)."""
    from ironaccel_cuda import ipc

    if not dev.attributes.memory_pools_supported:
        pytest.skip("no memory pools on this device")
    pool = dev.create_driver_pool(ipc=True)
    buf = pool.allocate(16)
    desc = ipc.export(buf)
    imports = ipc._imports.count()
    for offset in (-1, 1 << 48, 1 << 70, 1.5, "0"):
        # another pid: the same-process refusal comes first otherwise; the offset check precedes any driver call
        bad = dataclasses.replace(desc, pid=desc.pid + 1, offset=offset)
        raises_exactly(InvalidArgument, "cuMemPoolImportPointer", bad.open)
        assert ipc._imports.count() == imports
    bad = dataclasses.replace(desc, pid=desc.pid + 1, handle="x" * 64)
    raises_exactly(InvalidArgument, "cuMemPoolImportPointer", bad.open)
    assert ipc._imports.count() == imports
    buf.close()
    pool.close()


def test_ipc_send_unpicklable():
    from ironaccel_cuda import ipc

    a, b = socket.socketpair()
    try:
        err = raises_exactly(InvalidArgument, "ipc.send", ipc.send, a, lambda: None)
        assert isinstance(err.__cause__, (pickle.PicklingError, AttributeError, TypeError))
        raises_exactly(InvalidArgument, "ipc.send", ipc.send, a, threading_lock())
        ipc.send(a, {"still": "works"})  # the fd bookkeeping was reset
        assert ipc.recv(b) == {"still": "works"}
    finally:
        a.close()
        b.close()


def threading_lock():
    import threading

    return threading.Lock()
