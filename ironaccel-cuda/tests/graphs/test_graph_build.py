"""Graphs built node by node: every node kind, conditional if/while nodes, per-node updates, upload, DOT."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FAKE

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument

pytestmark = [pytest.mark.backend("cuda"),
              pytest.mark.skipif(FAKE, reason="the fake driver has no explicit graph construction")]

COUNTDOWN = r"""
extern "C" __global__ void countdown(cudaGraphConditionalHandle handle, int* counter) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int left = --(*counter);
        cudaGraphSetConditional(handle, left > 0 ? 1u : 0u);
    }
}
extern "C" __global__ void add_one(float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += 1.0f;
}
extern "C" __global__ void set_if(cudaGraphConditionalHandle handle, const int* flag) {
    if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(handle, *flag ? 1u : 0u);
}
"""


@pytest.fixture(scope="module")
def conditional_code():
    dev = cu.Device(0)
    code = cu.Program(COUNTDOWN, cu.CompileOptions(relocatable_device_code=True)).compile("cubin", arch=dev)
    return cu.Linker(code, device_runtime=True).link(arch=dev)


def test_every_node_kind(dev, kernels):
    n = 1024
    fn = kernels.function("saxpy")
    x = np.arange(n, dtype=np.float32)
    host_in = dev.alloc_pinned(n, "float32")
    host_in.array[:] = x
    host_out = dev.alloc_pinned(n, "float32")
    dx, dy = dev.alloc(n, "float32"), dev.alloc(n, "float32")
    recorded, waited = dev.create_event(), dev.create_event()
    calls = []
    g = cu.Graph(dev)
    up = g.add_memcpy(dx, host_in.array)
    zero = g.add_memset(dy, 0)
    k = g.add_kernel(fn, (n + 255) // 256, 256, 2.0, dx, dy, n, after=[up, zero])
    rec = g.add_event_record(recorded, after=k)
    child = cu.Graph(dev)
    child.add_kernel(fn, (n + 255) // 256, 256, 1.0, dx, dy, n)
    kid = g.add_child(child, after=rec)
    scratch = g.add_alloc(n, "float32", after=kid)
    copy = g.add_memcpy(scratch.buffer, dy, after=scratch)
    back = g.add_memcpy(host_out.array, scratch.buffer, after=copy)
    free = g.add_free(scratch, after=back)
    host = g.add_host_func(lambda: calls.append(float(host_out.array[3])), after=free)
    g.add_event_wait(waited, after=host)
    g.add_empty(after=host)
    assert g.node_count == 12
    waited.record()  # already complete: the wait node passes at once
    exe = g.instantiate()
    child.close()  # the child was copied in
    s = dev.create_stream()
    exe.upload(s)
    exe.launch(s)
    s.synchronize()
    np.testing.assert_allclose(host_out.array, 3 * x)
    assert calls == [9.0] and recorded.query()
    exe.launch(s)
    s.synchronize()
    assert calls == [9.0, 9.0]
    dot = g.dot()
    assert dot.startswith("digraph") and dot.count("->") >= 10
    assert len(g.dot(verbose=True)) > len(dot)
    exe.close()
    g.close()
    for obj in (dx, dy, host_in, host_out, recorded, waited):
        obj.close()
    s.close()


def test_per_node_parameter_update(dev, kernels):
    n = 512
    fn = kernels.function("saxpy")
    x = np.ones(n, np.float32)
    dx, dy, dz = (dev.alloc(n, "float32") for _ in range(3))
    dx.copy_from(x)
    calls = []
    g = cu.Graph(dev)
    zero = g.add_memset(dy, 0)
    k = g.add_kernel(fn, 2, 256, 2.0, dx, dy, n, after=zero)
    h = g.add_host_func(lambda: calls.append("a"), after=k)
    exe = g.instantiate()
    exe.launch()
    dev.default_stream.synchronize()
    np.testing.assert_array_equal(dy.copy_to_host(), 2 * x)
    exe.set_params(k, fn, 2, 256, 5.0, dx, dz, n)  # new scalar and a new output buffer
    exe.set_params(zero, dz, 0)
    exe.set_params(h, lambda: calls.append("b"))
    exe.launch()
    dev.default_stream.synchronize()
    np.testing.assert_array_equal(dz.copy_to_host(), 5 * x)
    np.testing.assert_array_equal(dy.copy_to_host(), 2 * x)  # untouched now
    assert calls == ["a", "b"]
    with pytest.raises(InvalidArgument):
        exe.set_params(k, fn, 2, 256, "not a float", dx, dz, n)
    with pytest.raises(InvalidArgument):
        exe.set_params(zero, dz)  # missing the value
    with pytest.raises(InvalidArgument):
        exe.set_params("node", 1)
    exe.close()
    with pytest.raises(ClosedError):
        exe.set_params(k, fn, 2, 256, 1.0, dx, dz, n)
    g.close()
    for b in (dx, dy, dz):
        b.close()


def test_while_node_runs_its_body_until_a_kernel_says_stop(dev, conditional_code):
    mod = dev.load_module(conditional_code)
    countdown, add_one = mod.function("countdown"), mod.function("add_one")
    n = 256
    counter, y = dev.alloc(1, "int32"), dev.alloc(n, "float32")
    g = cu.Graph(dev)
    loop = g.add_conditional("while", default=1)
    assert isinstance(loop, cu.ConditionalNode) and loop.handle != 0
    step = loop.body.add_kernel(add_one, 1, 256, y, n)
    loop.body.add_kernel(countdown, 1, 1, np.uint64(loop.handle), counter, after=step)
    exe = g.instantiate()
    for iterations in (100, 7, 1):
        counter.copy_from(np.array([iterations], np.int32))
        y.memset(0)
        exe.launch()
        dev.default_stream.synchronize()
        np.testing.assert_array_equal(y.copy_to_host(), np.full(n, iterations, np.float32))
        assert counter.copy_to_host()[0] == 0
    with pytest.raises(InvalidArgument):
        loop.body.instantiate()
    exe.close()
    g.close()
    counter.close()
    y.close()
    mod.close()


def test_a_library_kernel_is_a_kernel_node(dev, conditional_code):
    """A Library's kernel (a CUkernel, which cuLaunchKernel takes) becomes a kernel node through the CUfunction it
    has in the graph's context: given as is, cuGraphAddKernelNode answered INVALID_HANDLE."""
    lib = cu.Library(conditional_code)
    add_one = lib.function("add_one", dev)
    n = 256
    y = dev.alloc(n, "float32")
    y.memset(0)
    g = cu.Graph(dev)
    first = g.add_kernel(add_one, 1, 256, y, n)
    g.add_kernel(add_one, 1, 256, y, n, after=first)
    exe = g.instantiate()
    exe.launch()
    dev.default_stream.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), np.full(n, 2, np.float32))
    exe.set_params(first, add_one, 1, 128, y, n)  # half the threads: a per-node update takes it too
    exe.launch()
    dev.default_stream.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), np.r_[np.full(128, 4), np.full(128, 3)].astype(np.float32))
    exe.close()
    g.close()
    y.close()


def test_if_node(dev, conditional_code):
    mod = dev.load_module(conditional_code)
    set_if, add_one = mod.function("set_if"), mod.function("add_one")
    n = 64
    flag, y = dev.alloc(1, "int32"), dev.alloc(n, "float32")
    g = cu.Graph(dev)
    decide = g.add_kernel(set_if, 1, 1, np.uint64(0), flag)  # the handle is set below, per node update
    branch = g.add_conditional("if", default=0, after=decide)
    branch.body.add_kernel(add_one, 1, 64, y, n)
    exe = g.instantiate()
    exe.set_params(decide, set_if, 1, 1, np.uint64(branch.handle), flag)
    y.memset(0)
    for value, expected in ((1, 1.0), (0, 1.0), (1, 2.0)):
        flag.copy_from(np.array([value], np.int32))
        exe.launch()
        dev.default_stream.synchronize()
        np.testing.assert_array_equal(y.copy_to_host(), np.full(n, expected, np.float32))
    exe.close()
    g.close()
    flag.close()
    y.close()
    mod.close()


def test_graph_build_bad_input(dev, kernels):
    fn = kernels.function("saxpy")
    g, other = cu.Graph(dev), cu.Graph(dev)
    node = other.add_empty()
    buf = dev.alloc(16, "float32")
    with pytest.raises(InvalidArgument):
        g.add_empty(after=[node])  # a node of another graph
    with pytest.raises(InvalidArgument):
        g.add_empty(after=[object()])
    with pytest.raises(InvalidArgument):
        g.add_kernel(fn, 1, 1, 1.0)  # too few arguments
    with pytest.raises(InvalidArgument):
        g.add_memcpy(buf, np.zeros(3, np.float32))  # sizes differ
    with pytest.raises(InvalidArgument):
        g.add_memcpy(np.zeros(16, np.float32), np.zeros(16, np.float32))  # no device side
    with pytest.raises(InvalidArgument):
        g.add_memset(dev.alloc(2, "float64"), 0)
    with pytest.raises(InvalidArgument):
        g.add_memset(buf, -1)
    with pytest.raises(InvalidArgument):
        g.add_conditional("switch")
    with pytest.raises(InvalidArgument):
        g.add_host_func(42)
    with pytest.raises(InvalidArgument):
        g.add_event_record("event")
    with pytest.raises(InvalidArgument):
        g.add_child(g)
    with pytest.raises(InvalidArgument):
        g.add_alloc(0)
    with pytest.raises(InvalidArgument):
        g.add_free(buf.ptr)
    with pytest.raises(InvalidArgument):
        cu.Graph("cuda:0")
    g.close()
    with pytest.raises(ClosedError):
        g.add_empty()
    with pytest.raises(ClosedError):
        g.dot()
    other.close()
    buf.close()
