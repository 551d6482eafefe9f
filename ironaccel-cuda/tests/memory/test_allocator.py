"""One allocator protocol: every allocator hands out the same DeviceBuf, with copies, views, kernels, DLPack and CAI."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument, Unsupported
from ironaccel_cuda.driver_pool import device_attribute

pytestmark = pytest.mark.backend("cuda")


def raw_async(dev):
    """A user's own allocator by pointer: cuMemAllocAsync / cuMemFreeAsync called through cuda.bindings."""
    from cuda.bindings import driver

    frees = []

    def allocate(nbytes, stream):
        err, ptr = driver.cuMemAllocAsync(nbytes, stream.handle)
        assert err == driver.CUresult.CUDA_SUCCESS, err
        return int(ptr)

    def deallocate(ptr, nbytes, stream):
        frees.append((ptr, nbytes))
        (err,) = driver.cuMemFreeAsync(ptr, stream.handle)
        assert err == driver.CUresult.CUDA_SUCCESS, err

    alloc = cu.ExternalAllocator(dev, allocate, deallocate)
    alloc.frees = frees
    return alloc


FACTORIES = {
    "default pool": lambda dev, s: dev.default_pool,
    "driver pool": lambda dev, s: dev.create_driver_pool(),
    # a host pool's memory lives on the host: cuMemcpyHtoDAsync refuses it as a destination (H200), so
    # it is tested on its own in test_driver_pool.py, not with the device-memory copies here
    "MemPool": lambda dev, s: dev.create_pool(s),
    "virtual": lambda dev, s: cu.VirtualAllocator(dev),
    "managed": lambda dev, s: cu.ManagedAllocator(dev),
    "direct": lambda dev, s: cu.DirectAllocator(dev),
    "external": lambda dev, s: raw_async(dev),
}


@pytest.mark.parametrize("kind", list(FACTORIES))
def test_every_allocator_gives_a_devicebuf(dev, kernels, kind):
    if kind == "host pool" and not device_attribute(dev, "HOST_MEMORY_POOLS_SUPPORTED"):
        with pytest.raises(Unsupported):
            dev.create_driver_pool(host=True)
        return
    s = dev.create_stream()
    alloc = FACTORIES[kind](dev, s)
    assert isinstance(alloc, cu.Allocator) and alloc.device.ordinal == dev.ordinal
    n = 1 << 16
    x = np.arange(n, dtype=np.float32)
    a = alloc.allocate(n, "float32", stream=s)
    b = alloc.allocate(n, "float32", stream=s)
    assert type(a) is cu.DeviceBuf and a.size == n and a.nbytes == 4 * n and a.device.ordinal == dev.ordinal
    a.copy_from(x, stream=s)
    b.memset(0, stream=s)
    kernels.function("saxpy").launch(n // 256, 256, 2.0, a, b, n, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(b.copy_to_host(), 2 * x)
    np.testing.assert_array_equal(b[5:9].copy_to_host(), 2 * x[5:9])
    c = dev.alloc(n, "float32")
    c.copy_from(b)  # device to device, from any allocator's buffer
    np.testing.assert_array_equal(c.copy_to_host(), 2 * x)
    cai = b.__cuda_array_interface__
    assert cai["data"][0] == b.ptr and cai["shape"] == (n,)
    capsule = b.__dlpack__(stream=-1)
    del capsule
    other = dev.create_stream()
    other.wait(s.record())
    b.memset(1.0, stream=other)
    alloc.deallocate(b, other)  # freed after `other`'s work
    assert b.closed
    with pytest.raises(ClosedError):
        alloc.deallocate(b)
    with pytest.raises(InvalidArgument):
        alloc.deallocate(np.zeros(4))
    alloc.deallocate(a)
    c.close()
    s.synchronize()
    other.close()
    if kind == "external":
        assert len(alloc.frees) == 2 and {nbytes for _, nbytes in alloc.frees} == {4 * n}
    if hasattr(alloc, "outstanding"):
        assert alloc.outstanding() == 0
    if kind in ("driver pool", "host pool", "MemPool"):
        alloc.close()
    s.close()


def test_memory_pool_allocates_on_its_own_stream(dev):
    s, t = dev.create_stream(), dev.create_stream()
    pool = dev.create_pool(s)
    pool.allocate(16, stream=s).close()
    with pytest.raises(InvalidArgument, match="own stream"):
        pool.allocate(16, stream=t)
    t.close()
    with pytest.raises(ClosedError, match="stream"):
        pool.allocate(16, stream=t)
    s.close()
    with pytest.raises(ClosedError, match="stream"):
        pool.allocate(16, stream=s)
    with pytest.raises(InvalidArgument, match="own stream"):
        pool.allocate(16, stream=dev.default_stream)
    pool.close()


def test_external_allocator_frees_once_and_checks_what_it_is_given(dev):
    alloc = raw_async(dev)
    buf = alloc.allocate(100)
    view = buf[10:20]
    with pytest.raises(InvalidArgument, match="not allocated here"):
        alloc.deallocate(view)
    del buf, view
    gc.collect()  # collected: released exactly once
    dev.synchronize()
    assert len(alloc.frees) == 1 and alloc.outstanding() == 0
    for bad in (0, None, -8, "0x1000", 1.5):
        broken = cu.ExternalAllocator(dev, lambda nbytes, s, bad=bad: bad, lambda *a: None)
        with pytest.raises(InvalidArgument, match="not a device address"):
            broken.allocate(16)
    with pytest.raises(InvalidArgument):
        cu.ExternalAllocator(dev, "malloc", lambda *a: None)
    with pytest.raises(InvalidArgument):
        alloc.allocate(0)
    with pytest.raises(InvalidArgument):
        alloc.allocate(8, stream="default")


def test_pytorch_caching_allocator_behind_the_protocol(dev, kernels):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.fail("PyTorch is installed but sees no CUDA device")
    alloc = cu.ExternalAllocator(
        dev, lambda nbytes, s: torch.cuda.caching_allocator_alloc(nbytes, dev.ordinal, s.handle),
        lambda ptr, nbytes, s: torch.cuda.caching_allocator_delete(ptr))
    s = dev.create_stream()
    n = 4096
    x = alloc.allocate(n, "float32", stream=s)
    y = alloc.allocate(n, "float32", stream=s)
    x.copy_from(np.arange(n, dtype=np.float32), stream=s)
    y.memset(1.0, stream=s)
    kernels.function("saxpy").launch(n // 256, 256, 1.0, x, y, n, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), np.arange(n, dtype=np.float32) + 1)
    x.close()
    y.close()
    s.synchronize()
    s.close()
