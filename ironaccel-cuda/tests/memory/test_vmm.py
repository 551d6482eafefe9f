"""Growable virtual memory: grow and shrink in place, the KV-cache case (1 GiB to 64 GiB), views, the allocator,
bad input."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FAKE

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")

GiB = 1 << 30


def sentinel(k: int, end: bool) -> np.ndarray:
    return ((np.arange(16, dtype=np.uint32) * 2654435761 + k * 40503 + (7 if end else 0)) % 251).astype(np.uint8)


def test_reserve_options(dev):
    """The reservation's options: granularity, exportable chunks, read-only mapping; bad ones refused."""
    least = dev.reserve(1 << 20)
    advised = dev.reserve(1 << 20, granularity="recommended", exportable=True)
    assert advised.granularity >= least.granularity and advised.granularity % least.granularity == 0
    assert advised.capacity % advised.granularity == 0
    advised.resize(advised.granularity)
    data = np.arange(advised.granularity // 4, dtype=np.uint32)
    view = advised.view("uint32")
    view.copy_from(data)
    np.testing.assert_array_equal(view.copy_to_host(), data)
    read_only = dev.reserve(1 << 20, self_access="read")
    read_only.resize(read_only.granularity)
    assert read_only.mapped == read_only.granularity
    for bad in ({"granularity": "huge"}, {"self_access": "write"}, {"exportable": 1}, {"gpu_direct_rdma": "yes"}):
        with pytest.raises(InvalidArgument) as info:
            dev.reserve(1 << 20, **bad)
        assert info.value.op == "cuMemAddressReserve"
    for vb in (least, advised, read_only):
        vb.close()


def test_grow_and_shrink_in_place(dev):
    vb = dev.reserve(64 << 20)
    g = vb.granularity
    assert g > 0 and vb.capacity >= 64 << 20 and vb.capacity % g == 0 and vb.nbytes == 0 and vb.mapped == 0
    ptr = vb.ptr
    vb.resize(2 * g)
    first = vb.view("uint32")
    data = np.arange(2 * g // 4, dtype=np.uint32)
    first.copy_from(data)
    vb.resize(6 * g)  # grows by one chunk at the end: same address, data where it was
    assert vb.ptr == ptr and vb.nbytes == 6 * g and vb.mapped == 6 * g and not first.closed
    whole = vb.view("uint32")
    np.testing.assert_array_equal(whole.copy_to_host()[: data.size], data)
    whole[data.size:].copy_from(np.full(4 * g // 4, 9, np.uint32))
    vb.resize(3 * g)  # the second chunk starts below 3g: nothing is released
    assert vb.mapped == 6 * g and vb.nbytes == 3 * g and whole.closed and not first.closed
    vb.resize(2 * g)  # now the second chunk lies wholly past the end: released
    assert vb.mapped == 2 * g and first.size == data.size
    np.testing.assert_array_equal(first.copy_to_host(), data)
    vb.resize(4 * g + 100)  # a size that is not a whole chunk maps up to the next one
    assert vb.ptr == ptr and vb.nbytes == 4 * g + 100 and vb.mapped == 5 * g
    np.testing.assert_array_equal(vb.view("uint32")[: data.size].copy_to_host(), data)
    vb.resize(0)
    assert vb.mapped == 0 and first.closed
    vb.close()
    assert vb.closed and "closed" in repr(vb)


def test_kernels_write_growable_memory(dev, kernels):
    vb = dev.reserve(256 << 20)
    n = 1 << 20
    vb.resize(n * 4)
    x = dev.upload(np.arange(n, dtype=np.float32))
    y = vb.view("float32")
    y.memset(0)
    kernels.function("saxpy").launch(n // 256, 256, 2.0, x, y, n)
    vb.resize(2 * n * 4)
    y2 = vb.view("float32")
    y2[n:].memset(1.0)
    kernels.function("saxpy").launch(n // 256, 256, 1.0, x, y2[n:], n)
    out = y2.copy_to_host()
    np.testing.assert_array_equal(out[:n], 2 * np.arange(n, dtype=np.float32))
    np.testing.assert_array_equal(out[n:], np.arange(n, dtype=np.float32) + 1)
    x.close()
    vb.close()
    assert y.closed and y2.closed


def test_kv_cache_grows_from_1_to_64_gib_in_place(dev):
    """The KV-cache case: 64 steps of 1 GiB, a few sentinel bytes per GiB checked after every step."""
    steps = 64
    dev.default_pool.trim()  # memory earlier tests freed stays in the default pool (its threshold is raised)
    dev.synchronize()
    if not FAKE:
        free = dev.memory_info()[0]
        assert free >= (steps + 2) * GiB, f"needs {(steps + 2)} GiB free on cuda:{dev.ordinal}, has {free / GiB:.1f}"
    vb = dev.reserve(steps * GiB)
    ptr = vb.ptr
    try:
        for k in range(1, steps + 1):
            vb.resize(k * GiB)
            assert vb.ptr == ptr and vb.nbytes == k * GiB
            view = vb.view("uint8")
            start, end = (k - 1) * GiB, k * GiB
            view[start:start + 16].copy_from(sentinel(k, False))
            view[end - 16:end].copy_from(sentinel(k, True))
            for j in range(1, k + 1):  # every GiB written so far is still there
                lo, hi = (j - 1) * GiB, j * GiB
                assert np.array_equal(view[lo:lo + 16].copy_to_host(), sentinel(j, False)), (k, j)
                assert np.array_equal(view[hi - 16:hi].copy_to_host(), sentinel(j, True)), (k, j)
        if not FAKE:
            assert dev.memory_info()[0] <= free - steps * GiB + GiB
    finally:
        vb.close()
    if not FAKE:
        assert dev.memory_info()[0] >= free - GiB  # all 64 GiB went back


def test_growing_past_the_reservation(dev):
    vb = dev.reserve(8 << 20)
    vb.resize(vb.capacity)
    with pytest.raises(InvalidArgument, match="reservation"):
        vb.resize(vb.capacity + 1)
    assert vb.nbytes == vb.capacity  # unchanged
    vb.close()


def test_bad_input(dev):
    for capacity in (0, -1, 1.5, True, "1G", 1 << 60):
        with pytest.raises(InvalidArgument) as info:
            dev.reserve(capacity)
        assert info.value.op == "cuMemAddressReserve"
    vb = dev.reserve(4 << 20)
    for size in (-1, 2.0, None, True):
        with pytest.raises(InvalidArgument):
            vb.resize(size)
    with pytest.raises(InvalidArgument, match="resize first"):
        vb.view()
    vb.resize(10)
    with pytest.raises(InvalidArgument, match="whole number"):
        vb.view("float32")
    with pytest.raises(InvalidArgument):
        vb.view("uint8", stream=1)
    with pytest.raises(InvalidArgument):
        vb.grant_access(dev, "write")
    with pytest.raises(InvalidArgument):
        vb.grant_access(dev, "read")
    with pytest.raises(InvalidArgument):
        vb.grant_access("cuda:1")
    vb.close()
    vb.close()
    for call in (lambda: vb.resize(4), lambda: vb.view(), lambda: vb.ptr, lambda: vb.grant_access(dev)):
        with pytest.raises(ClosedError):
            call()
    with pytest.raises(TypeError):
        cu.VirtualBuffer()


def test_virtual_allocator(dev):
    alloc = cu.VirtualAllocator(dev)
    assert isinstance(alloc, cu.Allocator)
    s = dev.create_stream()
    buf = alloc.allocate(3000, "float64", stream=s)
    assert buf.size == 3000 and buf.nbytes == 24000 and alloc.outstanding() == 24000
    buf.copy_from(np.linspace(0, 1, 3000))
    np.testing.assert_array_equal(buf.copy_to_host(), np.linspace(0, 1, 3000))
    other = alloc.allocate(16)
    alloc.deallocate(buf, s)
    assert buf.closed and alloc.outstanding() == 16
    with pytest.raises(InvalidArgument):
        alloc.deallocate(other[2:4])
    other.close()
    assert alloc.outstanding() == 0
    with pytest.raises(InvalidArgument):
        alloc.allocate(0)
    s.close()


@pytest.mark.multi_gpu
def test_peer_access_to_a_growable_buffer(two, kernel_code):
    d0, d1 = two
    if not d1.can_access_peer(d0):
        pytest.fail("the two GPUs have no peer path")
    vb = d0.reserve(64 << 20)
    n = vb.granularity // 4
    vb.resize(n * 4)
    vb.grant_access(d1)  # for what is mapped now and for every later chunk
    vb.resize(2 * n * 4)
    vb.view("float32").copy_from(np.arange(2 * n, dtype=np.float32))
    out = d1.alloc(n, "float32")
    d1.enable_peer_access(d0)
    fn = d1.load_module(kernel_code).function("scale_offset")
    fn.launch(n // 256, 256, vb.view("float32")[n:], out, 1.0, 0.0, n)  # the chunk mapped after the grant
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(n, 2 * n, dtype=np.float32))
    out.close()
    vb.close()
