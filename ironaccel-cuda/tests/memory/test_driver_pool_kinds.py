"""Driver pools of each kind (device, host, managed; made or the driver's current one) and VirtualBuffer's
allocation properties: what the cuda.core compat's memory resources are built on."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FAKE

import ironaccel_cuda as cu
from ironaccel import InvalidArgument
from ironaccel_cuda.driver_pool import DriverPool, device_attribute
from ironaccel_cuda.vmm import VirtualBuffer

pytestmark = pytest.mark.backend("cuda")


@pytest.fixture
def dev():
    return cu.Device(0)


def test_create_refuses_what_the_driver_cannot_make(dev):
    for kind, kwargs in (("bogus", {}), ("managed", {"ipc": True}), ("host", {"ipc": True}),
                         ("device", {"location": ("host_numa", 0)}), ("host", {"location": ("device", 0)}),
                         ("device", {"ipc": 1}), ("device", {"max_size": -1}),
                         ("managed", {"location": ("gpu", 0)}), ("managed", {"location": ("host_numa", -1)}),
                         ("managed", {"location": "host"})):
        with pytest.raises(InvalidArgument):
            DriverPool.create(dev, kind, **kwargs)
    with pytest.raises(InvalidArgument):
        DriverPool.current(dev, "bogus")
    for kwargs in ({"host": True, "managed": True}, {"managed": "yes"}):
        with pytest.raises(InvalidArgument):
            dev.create_driver_pool(**kwargs)


def test_created_pools_are_not_the_device_handles(dev):
    """DriverPool.create: a pool its caller owns (collected with its last reference); create_driver_pool's is kept
    by the Device handle until that closes."""
    import gc
    import weakref

    own = DriverPool.create(dev, "device", max_size=4 << 20)
    assert own.kind == "device" and own.max_size == 4 << 20 and own.handle != dev.default_pool.handle
    buf = own.allocate(256, "uint8")
    buf.close()
    gone = weakref.ref(own)
    del own, buf
    gc.collect()
    assert gone() is None
    handle = cu.Device(0)
    kept = weakref.ref(handle.create_driver_pool(max_size=4 << 20))
    gc.collect()
    assert kept() is not None
    handle.close()  # closes it and lets it go
    gc.collect()
    assert kept() is None
    assert DriverPool.current(dev).handle == DriverPool.current(dev, "device").handle  # "device" by default


def test_current_device_pool_allocates_through_device_alloc(dev):
    pool = DriverPool.current(dev, "device")
    buf = pool.allocate(256, "float32")
    buf.copy_from(np.arange(256, dtype=np.float32))
    np.testing.assert_array_equal(buf.copy_to_host(), np.arange(256, dtype=np.float32))
    buf.close()
    pool.close()  # not owned: a no-op
    assert not pool.closed


def test_host_pool_memory_is_host_addressable(dev):
    if not device_attribute(dev, "HOST_MEMORY_POOLS_SUPPORTED"):
        pytest.skip("no host memory pools")
    pool = dev.create_driver_pool(host=True, max_size=4 << 20)
    buf = pool.allocate(1024, "int32")
    cu.host_array(buf)[:] = np.arange(1024, dtype=np.int32)
    np.testing.assert_array_equal(cu.host_array(buf), np.arange(1024, dtype=np.int32))
    # Host-pool memory is host memory: the driver refuses it as the source of cuMemcpyDtoH (H200, driver 580:
    # CUDA_ERROR_INVALID_VALUE), and ironaccel passes that on typed, naming the call.
    if not FAKE:
        with pytest.raises(InvalidArgument, match="cuMemcpyDtoHAsync"):
            buf.copy_to_host()
    buf.close()
    dev.synchronize()
    assert pool.usage().used == 0
    pool.close()
    assert pool.closed


@pytest.mark.skipif(FAKE, reason="the fake driver has no managed memory pools")
def test_managed_pool_memory_is_managed_for_ironaccel(dev):
    if not dev.attributes.concurrent_managed_access:
        pytest.skip("no concurrent managed access")
    for pool in (dev.create_driver_pool(managed=True, location=("device", 0)), DriverPool.current(dev, "managed")):
        assert pool.kind == "managed"
        buf = pool.allocate(1 << 16, "uint8")
        cu.host_array(buf)[:] = 9  # managed memory: the host writes it directly
        cu.prefetch(buf, dev)
        dev.synchronize()
        assert cu.managed_info(buf).last_prefetch_location == 0
        np.testing.assert_array_equal(buf.copy_to_host(), np.full(1 << 16, 9, np.uint8))
        buf.close()
        dev.synchronize()
        pool.close()


def test_virtual_buffer_takes_allocation_properties(dev):
    with pytest.raises(InvalidArgument):
        VirtualBuffer._create(dev, 1 << 20, granularity="huge")
    with pytest.raises(InvalidArgument):
        VirtualBuffer._create(dev, 1 << 20, self_access="write")
    with pytest.raises(InvalidArgument):
        VirtualBuffer._create(dev, 1 << 20, exportable=1)
    vb = VirtualBuffer._create(dev, 1 << 20, exportable=True, granularity="recommended")
    assert vb.capacity % vb.granularity == 0 and vb.capacity >= 1 << 20
    vb.resize(1 << 20)
    view = vb.view("uint8")
    view.copy_from(np.full(1 << 20, 3, np.uint8))
    np.testing.assert_array_equal(view.copy_to_host(), np.full(1 << 20, 3, np.uint8))
    vb.close()
    assert vb.closed
