"""DeviceBuf: allocation, views, memset, copies every way (sync and async), interop dicts, bad input, freeing."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import ironaccel_cuda as cu
from ironaccel import ClosedError, DriverError, DType, InvalidArgument, OutOfMemory

pytestmark = pytest.mark.backend("cuda")

rng = np.random.default_rng(1234)
DTYPES = ["float32", "float64", "int8", "int32", "uint16", "int64", "float16", "complex64", "bool"]


def random_array(n: int, dtype: str) -> np.ndarray:
    if dtype == "bool":
        return rng.random(n) > 0.5
    if dtype.startswith("complex"):
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    return rng.standard_normal(n).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip(dev, dtype):
    n = 10_007
    data = random_array(n, dtype)
    buf = dev.alloc(n, dtype)
    assert buf.size == n and buf.dtype is DType.of(dtype) and buf.nbytes == data.nbytes and len(buf) == n
    assert buf.device is dev and buf.ptr
    buf.copy_from(data)
    np.testing.assert_array_equal(buf.copy_to_host(), data)
    out = np.empty_like(data)
    assert buf.copy_to_host(out) is out
    np.testing.assert_array_equal(out, data)
    buf.close()


def test_multidimensional_host_arrays(dev):
    data = rng.standard_normal((64, 33)).astype(np.float32)
    buf = dev.alloc(data.size, "float32")
    buf.copy_from(data)
    out = np.empty((64, 33), np.float32)
    buf.copy_to_host(out)
    np.testing.assert_array_equal(out, data)
    buf.close()


def test_async_copies_on_a_stream(dev):
    s = dev.create_stream()
    n = 1 << 20
    data = rng.standard_normal(n).astype(np.float32)
    a = dev.alloc(n, "float32", stream=s)
    b = dev.alloc(n, "float32", stream=s)
    a.copy_from(data, stream=s)
    b.copy_from(a, stream=s)  # device to device
    out = np.zeros(n, np.float32)
    b.copy_to_host(out, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(out, data)
    a.close()
    b.close()
    s.close()


def test_device_to_device_sync(dev):
    data = rng.integers(0, 1000, 4096).astype(np.int32)
    a, b = dev.upload(data), dev.alloc(4096, "int32")
    b.memset(0xFF)
    b.copy_from(a)
    np.testing.assert_array_equal(b.copy_to_host(), data)
    a.close()
    b.close()


def test_pointer_attributes_of_any_address(dev):
    """pointer_attribute: the driver's view of device, page-locked and managed memory; None for pageable memory."""
    from ironaccel_cuda._driver import driver

    types = driver().CUmemorytype
    buf = dev.alloc(1024, "float32")
    pinned = dev.alloc_pinned(256, "float32")
    managed = cu.ManagedAllocator(dev).allocate(256, "float32") if dev.attributes.managed_memory else None
    try:
        assert cu.pointer_attribute(buf.ptr, "memory_type") == int(types.CU_MEMORYTYPE_DEVICE)
        assert cu.pointer_attribute(buf.ptr + 64, "DEVICE_ORDINAL") == 0  # inside the allocation too
        assert cu.pointer_attribute(np.uint64(buf.ptr), "CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL") == 0
        assert cu.pointer_attribute(buf.ptr, "is_managed") == 0
        assert cu.pointer_attribute(pinned.array.ctypes.data, "memory_type") == int(types.CU_MEMORYTYPE_HOST)
        if managed is not None:
            assert cu.pointer_attribute(managed.ptr, "is_managed") == 1
        pageable = np.zeros(64, np.float32)
        assert cu.pointer_attribute(pageable.ctypes.data, "memory_type") is None  # unknown to the driver
        for bad_ptr in (-1, 1 << 64, 1.5, True, None):
            with pytest.raises(InvalidArgument) as info:
                cu.pointer_attribute(bad_ptr, "memory_type")
            assert info.value.op == "cuPointerGetAttribute"
        for bad_name in ("no_such_attribute", "", 3):
            with pytest.raises(InvalidArgument, match="no pointer attribute"):
                cu.pointer_attribute(buf.ptr, bad_name)
    finally:
        for b in (buf, pinned, managed):
            if b is not None:
                b.close()


def test_address_range_of_any_address(dev):
    """address_range: the allocation holding an address (its base and size), with a context current."""
    buf = dev.alloc(1024, "float32")
    dev.bind()
    base, size = cu.address_range(buf.ptr + 100)
    assert base <= buf.ptr and base + size >= buf.ptr + buf.nbytes
    assert cu.address_range(np.uint64(buf.ptr)) == (base, size)
    pageable = np.zeros(64, np.float32)
    with pytest.raises(InvalidArgument) as info:  # not the driver's memory
        cu.address_range(pageable.ctypes.data)
    assert info.value.op == "cuMemGetAddressRange" and info.value.code in (1, 500)  # INVALID_VALUE, NOT_FOUND
    for bad in (-1, 1 << 64, 1.5, True, None):
        with pytest.raises(InvalidArgument) as info:
            cu.address_range(bad)
        assert info.value.op == "cuMemGetAddressRange" and info.value.code is None
    buf.close()


def test_memset(dev):
    buf = dev.alloc(1000, "uint8")
    buf.memset(7)
    np.testing.assert_array_equal(buf.copy_to_host(), np.full(1000, 7, np.uint8))
    buf.close()
    f = dev.alloc(999, "float32")
    f.memset(1.5)
    np.testing.assert_array_equal(f.copy_to_host(), np.full(999, 1.5, np.float32))
    f.memset(0)
    np.testing.assert_array_equal(f.copy_to_host(), np.zeros(999, np.float32))
    with pytest.raises(InvalidArgument):
        f.memset("x")
    f.close()
    h = dev.alloc(10, "float16")
    h.memset(-2.0)
    np.testing.assert_array_equal(h.copy_to_host(), np.full(10, -2.0, np.float16))
    h.close()
    d = dev.alloc(10, "float64")
    with pytest.raises(InvalidArgument):
        d.memset(1.0)  # 8-byte fills are not a driver memset
    d.close()


def test_views(dev):
    data = np.arange(100, dtype=np.float32)
    parent = dev.upload(data)
    view = parent[10:20]
    assert view.size == 10 and view.ptr == parent.ptr + 40 and view.dtype is parent.dtype
    np.testing.assert_array_equal(view.copy_to_host(), data[10:20])
    view.copy_from(np.full(10, -1, np.float32))
    expected = data.copy()
    expected[10:20] = -1
    np.testing.assert_array_equal(parent.copy_to_host(), expected)
    inner = view[2:4]
    assert inner.ptr == parent.ptr + 48
    with pytest.raises(InvalidArgument):
        parent[::2]
    with pytest.raises(InvalidArgument):
        parent[5:5]
    with pytest.raises(InvalidArgument):
        parent[3]
    parent.close()
    assert view.closed and inner.closed  # closing the parent closes its views
    with pytest.raises(ClosedError):
        view.copy_to_host()


def test_view_keeps_parent_alive(dev):
    used_before = dev.pool_usage()[0]
    parent = dev.alloc(1 << 20, "float32")
    parent.memset(0)
    view = parent[:1024]
    del parent
    gc.collect()
    view.memset(0)  # parent memory is still there
    np.testing.assert_array_equal(view.copy_to_host(), np.zeros(1024, np.float32))
    del view
    gc.collect()
    dev.synchronize()
    assert dev.pool_usage()[0] == used_before


def test_garbage_collection_frees(dev):
    dev.synchronize()
    before = dev.pool_usage()[0]
    for _ in range(50):
        dev.alloc(1 << 20)
    gc.collect()
    dev.synchronize()
    assert dev.pool_usage()[0] == before


def test_context_manager(dev):
    with dev.alloc(16) as buf:
        buf.memset(1)
    assert buf.closed


def test_cuda_array_interface(dev):
    buf = dev.alloc(12, "float64")
    cai = buf.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (12,) and cai["typestr"] == "<f8"
    assert cai["data"] == (buf.ptr, False) and cai["strides"] is None
    assert cai["stream"] == dev.default_stream.handle
    assert buf.__dlpack_device__() == (2, 0)
    buf.close()
    with pytest.raises(ClosedError):
        buf.__cuda_array_interface__  # noqa: B018


class _CAIArray:
    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


def test_from_foreign_cai_and_dlpack(dev):
    data = np.arange(64, dtype=np.int32)
    owner = dev.upload(data)
    cai = dict(owner.__cuda_array_interface__, shape=(8, 8), strides=(32, 4))
    view = cu.DeviceBuf.from_foreign(_CAIArray(cai))
    assert view.ptr == owner.ptr and view.size == 64 and view.dtype is DType.INT32
    np.testing.assert_array_equal(view.copy_to_host(), data)
    view.close()
    with pytest.raises(InvalidArgument):
        cu.DeviceBuf.from_foreign(_CAIArray(dict(cai, strides=(4, 32))))  # not C-contiguous

    class _DLPackOnly:
        def __init__(self, buf):
            self.buf = buf

        def __dlpack__(self, **kwargs):
            return self.buf.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.buf.__dlpack_device__()

    from ironaccel_cuda import _dlpack

    live = _dlpack.live_exports()
    dl_view = cu.DeviceBuf.from_foreign(_DLPackOnly(owner))
    assert dl_view.ptr == owner.ptr and dl_view.size == 64
    np.testing.assert_array_equal(dl_view.copy_to_host(), data)
    assert _dlpack.live_exports() == live + 1
    dl_view.close()
    assert _dlpack.live_exports() == live  # the producer's deleter ran
    owner.close()
    with pytest.raises(InvalidArgument):
        cu.DeviceBuf.from_foreign(object())


def test_copy_from_foreign_device_array(dev):
    src = dev.upload(np.arange(32, dtype=np.float32))
    dst = dev.alloc(32, "float32")
    dst.copy_from(_CAIArray(src.__cuda_array_interface__))
    np.testing.assert_array_equal(dst.copy_to_host(), np.arange(32, dtype=np.float32))
    src.close()
    dst.close()


@pytest.mark.parametrize("size", [0, -1, 2**62, 1.5, "8", True, None])
def test_bad_sizes(dev, size):
    with pytest.raises(InvalidArgument) as info:
        dev.alloc(size, "float32")
    assert info.value.op == "cuMemAllocAsync"


def test_bad_dtype(dev):
    with pytest.raises(InvalidArgument):
        dev.alloc(8, "float128")


def test_out_of_memory(dev):
    free_before = dev.memory_info()[0]
    with pytest.raises(OutOfMemory) as info:
        dev.alloc(dev.total_memory, "uint8")
    dev.synchronize()
    free_after = dev.memory_info()[0]  # a failed attempt must not leave the pool holding the device
    assert free_after >= free_before - (256 << 20), (free_before >> 20, free_after >> 20)
    expected_op = "cuMemAllocAsync" if dev.attributes.memory_pools_supported else "cuMemAlloc"
    assert info.value.op == expected_op and info.value.code_name == "CUDA_ERROR_OUT_OF_MEMORY"
    dev.alloc(16).close()  # the device still works


def test_mismatched_copies(dev):
    buf = dev.alloc(16, "float32")
    cases = [
        (lambda: buf.copy_from(np.zeros(17, np.float32)), "cuMemcpyHtoDAsync"),
        (lambda: buf.copy_from(np.zeros(16, np.float64)), "cuMemcpyHtoDAsync"),
        (lambda: buf.copy_from(np.zeros(16, np.int32)), "cuMemcpyHtoDAsync"),
        (lambda: buf.copy_from(np.zeros((16, 2), np.float32)[:, 0]), "cuMemcpyHtoDAsync"),
        (lambda: buf.copy_from(np.zeros((4, 4), np.float32, order="F")), "cuMemcpyHtoDAsync"),
        (lambda: buf.copy_to_host(np.zeros(15, np.float32)), "cuMemcpyDtoHAsync"),
        (lambda: buf.copy_to_host(np.zeros(16, np.int32)), "cuMemcpyDtoHAsync"),
        (lambda: buf.copy_to_host(np.zeros((16, 2), np.float32)[:, 0]), "cuMemcpyDtoHAsync"),
        (lambda: buf.copy_to_host([0.0] * 16), "cuMemcpyDtoHAsync"),
        (lambda: buf.copy_from(dev.alloc(8, "float32")), "cuMemcpyDtoDAsync"),
        (lambda: buf.copy_from(dev.alloc(16, "int32")), "cuMemcpyDtoDAsync"),
        (lambda: buf.copy_from([1, 2, 3]), "DeviceBuf.copy_from"),
        (lambda: buf.copy_from(np.zeros(16, np.float32), stream="s"), "cuMemcpyHtoDAsync"),
    ]
    for call, op in cases:
        with pytest.raises(InvalidArgument) as info:
            call()
        assert info.value.op == op, (op, info.value)
    readonly = np.zeros(16, np.float32)
    readonly.flags.writeable = False
    with pytest.raises(InvalidArgument):
        buf.copy_to_host(readonly)
    buf.close()


def test_closed_buffer(dev):
    buf = dev.alloc(16, "float32")
    buf.close()
    buf.close()  # idempotent, never a double free
    assert buf.closed and buf.ptr is None
    for call in (lambda: buf.copy_from(np.zeros(16, np.float32)), buf.copy_to_host, lambda: buf.memset(0),
                 lambda: buf[0:4], lambda: buf.__dlpack__(), lambda: dev.alloc(16, "float32").copy_from(buf)):
        with pytest.raises(ClosedError) as info:
            call()
        assert info.value.op


def test_closed_stream_in_copy(dev):
    s = dev.create_stream()
    buf = dev.alloc(16, "float32")
    s.close()
    with pytest.raises(ClosedError):
        buf.copy_from(np.zeros(16, np.float32), stream=s)
    with pytest.raises(ClosedError):
        buf.copy_to_host(stream=s)
    buf.close()


def test_buffer_outlives_its_stream(dev):
    s = dev.create_stream()
    buf = dev.alloc(1024, "float32", stream=s)
    s.close()
    buf.close()  # freed on the default stream instead
    dev.synchronize()


def test_buffer_of_another_device_is_rejected(dev):
    """A buffer of device 1 on a stream of device 0: real with two GPUs, simulated with one."""
    buf = dev.alloc(16, "float32")
    buf._ordinal = 1  # as if it lived on cuda:1
    s = dev.create_stream()
    with pytest.raises(InvalidArgument) as info:
        buf.copy_from(np.zeros(16, np.float32), stream=s)
    assert "cuda:1" in str(info.value)
    with pytest.raises(InvalidArgument):
        buf.copy_to_host(stream=s)
    with pytest.raises(InvalidArgument):
        buf.memset(0, stream=s)
    buf._ordinal = 0
    buf.close()
    s.close()


def test_adopt_wraps_foreign_memory_and_releases_it_once(dev):
    from ironaccel_cuda._driver import call
    from ironaccel_cuda.memory import adopt

    dev.bind()
    ptr = int(call("cuMemAlloc", 4096))
    released = []

    def release():
        released.append(ptr)
        call("cuMemFree", ptr)

    buf = adopt(ptr, 1024, "float32", dev, release=release)
    host = np.arange(1024, dtype=np.float32)
    buf.copy_from(host)
    np.testing.assert_array_equal(buf.copy_to_host(), host)
    view = buf[10:20]
    np.testing.assert_array_equal(view.copy_to_host(), host[10:20])
    buf.close()
    buf.close()
    assert released == [ptr] and view.closed
    with pytest.raises(InvalidArgument):
        adopt(0, 4, "uint8", dev)
    with pytest.raises(InvalidArgument):
        adopt(ptr, 0, "uint8", dev)


def test_copy_peer_by_context_addresses(dev):
    """copy_peer: device addresses of named contexts (here the primary one on both sides), synchronous or queued on
    a stream given as a Stream or a CUstream address."""
    n = 4096
    data = np.arange(n, dtype=np.float32)
    src, dst = dev.alloc(n, "float32"), dev.alloc(n, "float32")
    src.copy_from(data)
    dst.memset(0)
    dev.bind()
    ctx = cu.current_context_handle()
    cu.copy_peer(dst.ptr, ctx, src.ptr, ctx, src.nbytes)
    np.testing.assert_array_equal(dst.copy_to_host(), data)
    s = dev.create_stream()
    for stream in (s, s.handle):
        dst.memset(0, stream=s)
        cu.copy_peer(dst.ptr + 400, ctx, src.ptr, ctx, 400, stream=stream)  # 100 elements, to element 100
        s.synchronize()
        out = dst.copy_to_host()
        np.testing.assert_array_equal(out[100:200], data[:100])
        assert not out[:100].any() and not out[200:].any()
    cu.copy_peer(dst.ptr, ctx, src.ptr, ctx, 0)  # nothing to copy
    with pytest.raises(DriverError) as info:  # past the end of the source allocation: the driver's refusal
        cu.copy_peer(dst.ptr, ctx, src.ptr + 8, ctx, src.nbytes)
    assert info.value.op == "cuMemcpyPeer" and info.value.code is not None
    for args, kw in (((0, ctx, src.ptr, ctx, 8), {}), ((dst.ptr, 0, src.ptr, ctx, 8), {}),
                     ((dst.ptr, ctx, src.ptr, "ctx", 8), {}), ((dst.ptr, ctx, src.ptr, ctx, -1), {}),
                     ((dst.ptr, ctx, src.ptr, ctx, 8), {"stream": 1.5})):
        with pytest.raises(InvalidArgument) as info:
            cu.copy_peer(*args, **kw)
        assert info.value.op in ("cuMemcpyPeer", "cuMemcpyPeerAsync") and info.value.code is None
    s.close()
    with pytest.raises(ClosedError):
        cu.copy_peer(dst.ptr, ctx, src.ptr, ctx, 8, stream=s)
    for x in (src, dst):
        x.close()


def test_device_memory_by_address_in_the_current_context(dev):
    """device_alloc / managed_alloc / alloc_pitch / alloc_async hand out addresses of the current context that
    hold data (written and read back through a DeviceBuf view); device_free and free_async give them back."""
    from ironaccel_cuda.memory import adopt

    n = 1024
    data = np.arange(n, dtype=np.float32)
    dev.bind()
    s = dev.create_stream()
    made = [(cu.device_alloc(4 * n), cu.device_free), (cu.managed_alloc(4 * n), cu.device_free),
            (cu.managed_alloc(4 * n, attach="host"), cu.device_free)]
    ptr, pitch = cu.alloc_pitch(4 * n, 3, 4)
    assert pitch >= 4 * n and pitch % 4 == 0
    made.append((ptr + 2 * pitch, None))  # the third row
    async_ptr = cu.alloc_async(4 * n, s)
    s.synchronize()
    made.append((async_ptr, None))
    for addr, _ in made:
        view = adopt(addr, n, "float32", dev)
        view.copy_from(data)
        np.testing.assert_array_equal(view.copy_to_host(), data)
        view.close()
    cu.attach_address(made[2][0], s, mode="single")  # the host-attached allocation, to this stream
    cu.attach_address(made[2][0], s.handle, mode="global", nbytes=0)
    s.synchronize()
    for addr, free in made[:3]:
        free(addr)
    cu.device_free(ptr)
    cu.free_async(async_ptr, s)
    s.synchronize()
    s.close()


def test_device_memory_by_address_bad_input(dev):
    dev.bind()
    s = dev.create_stream()
    cases = [
        ("cuMemAlloc", lambda: cu.device_alloc(0)), ("cuMemAlloc", lambda: cu.device_alloc(True)),
        ("cuMemAlloc", lambda: cu.device_alloc(-4)), ("cuMemFree", lambda: cu.device_free(0)),
        ("cuMemAllocManaged", lambda: cu.managed_alloc(64, attach="single")),
        ("cuMemAllocManaged", lambda: cu.managed_alloc(1 << 64)),
        ("cuMemAllocPitch", lambda: cu.alloc_pitch(64, 2, 3)), ("cuMemAllocPitch", lambda: cu.alloc_pitch(0, 2, 4)),
        ("cuStreamAttachMemAsync", lambda: cu.attach_address(1 << 20, s, mode="all")),
        ("cuStreamAttachMemAsync", lambda: cu.attach_address(1 << 20, "s")),
        ("cuStreamAttachMemAsync", lambda: cu.attach_address(1 << 20, s, nbytes=-1)),
        ("cuMemAllocAsync", lambda: cu.alloc_async(64, 1.5)), ("cuMemFreeAsync", lambda: cu.free_async(0, s)),
    ]
    for op, bad in cases:
        with pytest.raises(InvalidArgument) as info:
            bad()
        assert info.value.op == op and info.value.code is None, (op, info.value)
    s.close()
    with pytest.raises(ClosedError):
        cu.alloc_async(64, s)
