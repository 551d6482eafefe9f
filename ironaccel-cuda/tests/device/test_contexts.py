"""Device attributes by name, context limits and cache configuration, occupancy, explicit and green contexts."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from helpers import FAKE

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument, InvalidState

pytestmark = pytest.mark.backend("cuda")

SMID = r"""
extern "C" __global__ void record_smid(unsigned* out, long long spin) {
    if (threadIdx.x == 0) {
        unsigned id;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
        out[blockIdx.x] = id;
        long long start = clock64();
        while (clock64() - start < spin) { }
    }
}
"""


def test_attribute_by_name(dev):
    a = dev.attributes
    assert dev.attribute("MULTIPROCESSOR_COUNT") == a.multiprocessor_count
    assert dev.attribute("multiprocessor_count") == a.multiprocessor_count
    assert dev.attribute("CU_DEVICE_ATTRIBUTE_WARP_SIZE") == 32
    assert dev.attribute("max_shared_memory_per_block_optin") == a.max_shared_memory_per_block_optin
    with pytest.raises(InvalidArgument) as info:
        dev.attribute("multiprocesor_count")
    assert "multiprocessor_count" in str(info.value)  # suggests the near miss
    for bad in ("", 5, None, "max"):
        with pytest.raises(InvalidArgument):
            dev.attribute(bad)


def test_limits_and_cache_config(dev):
    before = dev.limit("stack_size")
    assert before > 0
    dev.set_limit("stack_size", before + 1024)
    assert dev.limit("stack_size") >= before + 1024
    dev.set_limit("stack_size", before)
    assert dev.limit("printf_fifo_size") > 0 and dev.limit("MALLOC_HEAP_SIZE") > 0
    with pytest.raises(InvalidArgument):
        dev.limit("stack")
    with pytest.raises(InvalidArgument):
        dev.set_limit("stack_size", -1)
    old = dev.cache_config
    assert old in ("prefer_none", "prefer_shared", "prefer_l1", "prefer_equal")
    dev.set_cache_config("prefer_l1")
    assert dev.cache_config in ("prefer_l1", old)  # a device may ignore the preference
    dev.set_cache_config(old)
    with pytest.raises(InvalidArgument):
        dev.set_cache_config("prefer_more")
    # the same of whatever context is current: here the primary context, bound by the calls above
    assert cu.current_context_limit("stack_size") == dev.limit("stack_size") == before
    cu.set_current_context_limit("CU_LIMIT_STACK_SIZE", before + 2048)
    assert dev.limit("stack_size") >= before + 2048
    cu.set_current_context_limit("stack_size", before)
    assert cu.current_context_cache_config() == dev.cache_config == old
    cu.set_current_context_cache_config("prefer_shared")
    assert dev.cache_config in ("prefer_shared", old)
    cu.set_current_context_cache_config(old)
    for bad, op in ((lambda: cu.current_context_limit("stack"), "cuCtxGetLimit"),
                    (lambda: cu.set_current_context_limit("stack_size", -1), "cuCtxSetLimit"),
                    (lambda: cu.set_current_context_cache_config("prefer_more"), "cuCtxSetCacheConfig")):
        with pytest.raises(InvalidArgument) as info:
            bad()
        assert info.value.op == op
    seen = []

    def no_context():
        for query in (lambda: cu.current_context_limit("stack_size"), cu.current_context_cache_config):
            try:
                query()
            except InvalidState as exc:
                seen.append(exc.code)

    t = threading.Thread(target=no_context)
    t.start()
    t.join()
    assert seen == [201, 201]  # CUDA_ERROR_INVALID_CONTEXT: a new thread has no current context


def test_occupancy_queries(dev, kernels):
    fn = kernels.function("saxpy")
    grid, block = fn.max_potential_block_size()
    assert 0 < block <= 1024 and block % 32 == 0 and grid >= dev.attributes.multiprocessor_count
    _, limited = fn.max_potential_block_size(block_limit=128)
    assert 0 < limited <= 128
    asked = []
    _, with_smem = fn.max_potential_block_size(lambda b: asked.append(b) or 4 * b)
    assert asked and 0 < with_smem <= 1024
    with pytest.raises(ZeroDivisionError):
        fn.max_potential_block_size(lambda b: 1 // 0)  # an error in the callable is raised, not lost
    avail = fn.available_dynamic_shared(2, 256)
    assert 0 < avail <= dev.attributes.max_shared_memory_per_multiprocessor
    assert fn.max_active_blocks_per_sm(256) >= 1
    assert 1 <= fn.max_potential_cluster_size(16, 128) <= 16
    assert fn.max_active_clusters(16, 128, cluster=2) >= 1
    for bad in (lambda: fn.available_dynamic_shared(0, 256), lambda: fn.max_potential_block_size(-1),
                lambda: fn.max_active_clusters(15, 128, cluster=2), lambda: fn.max_potential_cluster_size((0,), 1),
                lambda: fn.max_potential_block_size(lambda b: "x")):
        with pytest.raises(InvalidArgument):
            bad()


def test_current_context_handle_and_device(dev):
    """Whatever context is current: its address and device, and 0 / None on a thread with none."""
    dev.bind()
    assert cu.current_context_handle() != 0 and cu.current_device_ordinal() == 0
    primary = cu.current_context_handle()
    from cuda.bindings import driver

    version = cu.context_api_version(primary)
    assert version > 0 and cu.context_api_version(driver.CUcontext(primary)) == version
    if not FAKE:  # the fake driver's created contexts are the primary one
        ctx = dev.create_context()
        with ctx:
            assert cu.current_context_handle() == ctx.handle != primary
            assert cu.current_device_ordinal() == 0
        assert cu.current_context_handle() == primary
        assert cu.context_api_version(ctx) == cu.context_api_version(ctx.handle) > 0
        ctx.close()
        with pytest.raises(ClosedError):
            cu.context_api_version(ctx)
    for bad in ("ctx", 0, -1, 1 << 64, True, None):
        with pytest.raises(InvalidArgument) as info:
            cu.context_api_version(bad)
        assert info.value.op == "cuCtxGetApiVersion"
    seen = []
    t = threading.Thread(target=lambda: seen.append((cu.current_context_handle(), cu.current_device_ordinal())))
    t.start()
    t.join()
    assert seen == [(0, None)]  # a new thread has no current context


@pytest.mark.skipif(FAKE, reason="the fake driver has one context per device")
def test_explicit_context(dev, kernel_code):
    assert cu.current_context() is not None
    ctx = dev.create_context()
    before = cu.current_context()
    assert before is not ctx  # creating one does not make it current
    with ctx:
        assert cu.current_context() is ctx
    assert cu.current_context() is before
    s = ctx.create_stream()
    mod = ctx.load_module(kernel_code)
    fn = mod.function("saxpy")
    n = 512
    dx, dy = dev.alloc(n, "float32", stream=s), dev.alloc(n, "float32", stream=s)
    dx.copy_from(np.ones(n, np.float32), stream=s)
    dy.memset(0, stream=s)
    fn.launch(2, 256, 3.0, dx, dy, n, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(dy.copy_to_host(), np.full(n, 3, np.float32))
    ctx.synchronize()
    dx.close()
    dy.close()
    ctx.close()
    ctx.close()
    assert s.closed and mod.closed
    with pytest.raises(ClosedError):
        ctx.push()
    with pytest.raises(ClosedError):
        ctx.create_stream()
    with pytest.raises(InvalidArgument):
        dev.create_context(sched="sometimes")
    other = dev.create_context()
    with pytest.raises(InvalidArgument):
        other.pop()  # never pushed here
    other.close()


@pytest.mark.skipif(FAKE, reason="the fake driver has no SM partitions")
def test_green_contexts_run_on_disjoint_sms(dev):
    total = dev.attributes.multiprocessor_count
    a, b = dev.split_sms(32, groups=2)
    assert a.sm_count >= 32 and b.sm_count >= 32 and a.sm_count + b.sm_count <= total
    lib = cu.Library(cu.Program(SMID).compile("cubin", arch=dev))
    fn = lib.function("record_smid", dev)
    blocks = 4 * total
    outs = {}
    streams = {name: g.create_stream() for name, g in (("a", a), ("b", b))}
    for name in streams:
        outs[name] = dev.alloc(blocks, "uint32")
        outs[name].memset(0xFFFFFFFF)
    dev.default_stream.synchronize()
    for name, s in streams.items():  # both partitions at once
        fn.launch(blocks, 32, outs[name], 20_000, stream=s)
    for s in streams.values():
        s.synchronize()
    used = {name: set(outs[name].copy_to_host().tolist()) for name in outs}
    assert 0xFFFFFFFF not in used["a"] | used["b"]
    assert used["a"].isdisjoint(used["b"]), (used["a"], used["b"])
    assert 1 < len(used["a"]) <= a.sm_count and 1 < len(used["b"]) <= b.sm_count
    whole = dev.alloc(blocks, "uint32")
    fn.launch(blocks, 32, whole, 20_000)
    assert len(set(whole.copy_to_host().tolist())) > max(a.sm_count, b.sm_count)  # the whole device is wider
    for buf in (*outs.values(), whole):
        buf.close()
    a.close()
    b.close()
    assert all(s.closed for s in streams.values())
    with pytest.raises(ClosedError):
        a.create_stream()
    lib.close()


@pytest.mark.skipif(FAKE, reason="the fake driver has no SM partitions")
def test_green_context_bad_input(dev):
    total = dev.attributes.multiprocessor_count
    with pytest.raises(InvalidArgument) as info:
        dev.split_sms(total + 1)
    assert "larger than" in str(info.value)
    with pytest.raises(InvalidArgument):
        dev.split_sms(total // 2 + 1, groups=2)  # two of them do not fit
    for bad in (0, -3, 2.5, True):
        with pytest.raises(InvalidArgument):
            dev.split_sms(bad)
    parts = dev.split_sms(16)
    assert len(parts) >= 2 and all(p.sm_count >= 16 for p in parts)
    for p in parts:
        p.close()
