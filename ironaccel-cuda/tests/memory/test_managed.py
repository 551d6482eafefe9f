"""Managed memory: host view, kernels, prefetch both ways, advice, stream attach, the allocator, bad input.

Allocations stay small (at most 64 MiB here): never more managed memory than the device has free.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument, OutOfMemory, Unsupported

pytestmark = pytest.mark.backend("cuda")

MiB = 1 << 20


@pytest.fixture
def managed(dev):
    return cu.ManagedAllocator(dev)


def test_host_and_device_share_managed_memory(dev, managed, kernels):
    n = 1 << 20
    x = managed.allocate(n, "float32")
    y = managed.allocate(n, "float32")
    hx, hy = cu.host_array(x), cu.host_array(y)
    assert hx.shape == (n,) and hx.dtype == np.float32 and hx.ctypes.data == x.ptr
    hx[:] = np.arange(n, dtype=np.float32)
    hy[:] = 1.0
    kernels.function("saxpy").launch(n // 256, 256, 2.0, x, y, n)
    dev.synchronize()
    np.testing.assert_array_equal(hy, 2 * np.arange(n, dtype=np.float32) + 1)  # read on the host, no copy
    np.testing.assert_array_equal(y.copy_to_host(), hy)  # and as any DeviceBuf
    np.testing.assert_array_equal(cu.host_array(y[10:20]), hy[10:20])
    assert managed.outstanding() == 2 * n * 4
    x.close()
    managed.deallocate(y)
    assert managed.outstanding() == 0


def test_prefetch_to_the_device_and_back(dev, managed):
    s = dev.create_stream()
    buf = managed.allocate(16 * MiB // 4, "float32", stream=s)
    cu.host_array(buf)[:] = 3.0
    cu.prefetch(buf, dev, stream=s)
    s.synchronize()
    assert cu.managed_info(buf).last_prefetch_location == dev.ordinal
    np.testing.assert_array_equal(buf.copy_to_host(), np.full(buf.size, 3.0, np.float32))
    cu.prefetch(buf, "host", stream=s)
    s.synchronize()
    assert cu.managed_info(buf).last_prefetch_location == "host"
    cu.prefetch(buf[: buf.size // 2], dev.ordinal)  # a view prefetches its own bytes; default stream
    dev.synchronize()
    assert cu.host_array(buf)[-1] == 3.0
    buf.close()
    s.close()


def test_advice(dev, managed):
    buf = managed.allocate(4 * MiB)
    info = cu.managed_info(buf)
    assert info.read_mostly is False and info.preferred_location is None and info.accessed_by == ()
    cu.advise(buf, "read_mostly")
    cu.advise(buf, "preferred_location", "host")
    cu.advise(buf, "accessed_by", dev)
    info = cu.managed_info(buf)
    assert info.read_mostly is True and info.preferred_location == "host" and info.accessed_by == (dev.ordinal,)
    cu.advise(buf, "preferred_location", dev)
    assert cu.managed_info(buf).preferred_location == dev.ordinal
    cu.advise(buf, "unset_read_mostly")
    cu.advise(buf, "unset_preferred_location")
    cu.advise(buf, "unset_accessed_by", dev)
    info = cu.managed_info(buf)
    assert info.read_mostly is False and info.preferred_location is None and info.accessed_by == ()
    buf.close()


def test_attach_to_a_stream(dev, managed, kernels):
    s = dev.create_stream()
    host_first = cu.ManagedAllocator(dev, host_first=True)
    buf = host_first.allocate(4096, "float32")
    cu.host_array(buf)[:] = 2.0
    cu.attach(buf, s)  # only s (and the host) may touch it now
    s.synchronize()
    kernels.function("saxpy").launch(16, 256, 1.0, buf, buf, 4096, stream=s)
    s.synchronize()
    assert (cu.host_array(buf) == 4.0).all()
    cu.attach(buf[100:200], s, "global")  # attach always covers the whole allocation
    cu.attach(buf, s, "host")
    s.synchronize()
    buf.close()
    s.close()


def test_bad_input(dev, managed, monkeypatch):
    plain = dev.alloc(1024)
    for fn, args in ((cu.prefetch, (dev,)), (cu.advise, ("read_mostly",)), (cu.attach, (dev.default_stream,)),
                     (cu.managed_info, ())):
        with pytest.raises(InvalidArgument, match="not managed"):
            fn(plain, *args)
    with pytest.raises(InvalidArgument, match="cannot address"):
        cu.host_array(plain)
    buf = managed.allocate(1024)
    with pytest.raises(InvalidArgument):
        cu.prefetch(buf, "gpu")
    with pytest.raises(InvalidArgument):
        cu.prefetch(buf, 99)
    with pytest.raises(InvalidArgument):
        cu.prefetch(buf, dev, stream=7)
    with pytest.raises(InvalidArgument):
        cu.advise(buf, "mostly_read")
    with pytest.raises(InvalidArgument, match="needs a location"):
        cu.advise(buf, "preferred_location")
    with pytest.raises(InvalidArgument):
        cu.attach(buf, None)
    with pytest.raises(InvalidArgument):
        cu.attach(buf, dev.default_stream, "everywhere")
    with pytest.raises(InvalidArgument):
        cu.host_array(np.zeros(4))
    # a device without concurrent managed access cannot be a prefetch target
    attrs = dev._state.attributes
    monkeypatch.setattr(dev._state, "attributes", replace(attrs, concurrent_managed_access=False))
    with pytest.raises(Unsupported) as info:
        cu.prefetch(buf, dev)
    assert info.value.op == "cuMemPrefetchAsync"
    monkeypatch.setattr(dev._state, "attributes", replace(attrs, managed_memory=False))
    with pytest.raises(Unsupported):
        cu.ManagedAllocator(dev)
    monkeypatch.setattr(dev._state, "attributes", attrs)
    with pytest.raises(OutOfMemory, match="has free"):
        managed.allocate(dev.total_memory)  # more than is free: refused before the driver
    for size in (0, -1, 2.5):
        with pytest.raises(InvalidArgument):
            managed.allocate(size)
    with pytest.raises(InvalidArgument):
        cu.ManagedAllocator(dev, host_first="yes")
    buf.close()
    for fn, args in ((cu.prefetch, (dev,)), (cu.advise, ("read_mostly",)), (cu.host_array, ())):
        with pytest.raises(ClosedError):
            fn(buf, *args)
    plain.close()
