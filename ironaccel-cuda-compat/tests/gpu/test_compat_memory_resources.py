"""The cuda.core compat's memory resources on a device: own device pools, pinned and managed pools, ManagedBuffer
operations, virtual memory, and the release-threshold setting a user makes.

Contents are checked from the host (page-locked or managed memory, or a copy into
a LegacyPinnedMemoryResource buffer), so a resource that hands out wrong memory fails.
"""

from __future__ import annotations

import ctypes

import pytest
from conftest import FAKE

import ironaccel_cuda as cu

pytestmark = pytest.mark.backend("cuda")


def _host_bytes(cc, device, buf):
    """The bytes of `buf`, read on the host after a copy into page-locked memory."""
    pinned = cc.LegacyPinnedMemoryResource().allocate(buf.size)
    s = device.create_stream()
    buf.copy_to(pinned, stream=s)
    s.sync()
    data = ctypes.string_at(int(pinned.handle), buf.size)
    pinned.close()
    s.close()
    return data


def test_device_resource_with_options_owns_a_capped_pool(cc, device):
    from ironaccel_cuda_compat.cuda_core._utils.cuda_utils import CUDAError

    shared = cc.DeviceMemoryResource(device)
    mr = cc.DeviceMemoryResource(device, options=cc.DeviceMemoryResourceOptions(max_size=2 << 20))
    assert mr.is_handle_owned and not shared.is_handle_owned
    assert int(mr.handle) != int(shared.handle)
    assert not mr.is_ipc_enabled and mr.device_id == 0
    s = device.create_stream()
    buf = mr.allocate(4096, stream=s)
    buf.fill(0x5A, stream=s)
    assert _host_bytes(cc, device, buf) == b"\x5a" * 4096
    assert mr.attributes.used_mem_current >= 4096
    with pytest.raises(CUDAError):
        mr.allocate(64 << 20, stream=s)  # far more than max_size
    buf.close(s)
    s.sync()
    assert mr.attributes.used_mem_current == 0
    attrs = mr.attributes
    mr.close()
    assert mr.is_closed
    assert attrs.used_mem_high >= 4096  # the attribute bundle keeps the closed resource's pool alive
    with pytest.raises(RuntimeError):
        mr.allocate(16, stream=s)
    s.close()


def test_device_resource_peer_access_of_its_own_pool(cc, device):
    mr = cc.DeviceMemoryResource(device, options={"max_size": 2 << 20})
    assert set(mr.peer_accessible_by) == set()
    mr.peer_accessible_by = [device]  # the owning device is not a peer: nothing to grant
    assert set(mr.peer_accessible_by) == set()
    with pytest.raises(TypeError):
        mr.peer_accessible_by = ["cuda:1"]
    mr.close()


def test_a_users_release_threshold_wins(cc, device, monkeypatch):
    from ironaccel_cuda.driver_pool import ENV_RELEASE_THRESHOLD, MAX_THRESHOLD

    pool = cu.Device(0).default_pool
    before = pool.release_threshold
    try:
        pool.release_threshold = 0
        monkeypatch.setenv(ENV_RELEASE_THRESHOLD, "0")
        assert cc.DeviceMemoryResource(device).attributes.release_threshold == 0
        monkeypatch.delenv(ENV_RELEASE_THRESHOLD)
        assert cc.DeviceMemoryResource(device).attributes.release_threshold == MAX_THRESHOLD  # as cuda.core does
    finally:
        pool.release_threshold = before


def test_pinned_resource_hands_out_host_memory_the_device_writes(cc, device):
    if not device.properties.host_memory_pools_supported:
        pytest.skip("no host memory pools")
    with pytest.raises(ValueError, match="numa_id must be >= 0"):
        cc.PinnedMemoryResource(cc.PinnedMemoryResourceOptions(numa_id=-1))
    mr = cc.PinnedMemoryResource(cc.PinnedMemoryResourceOptions(max_size=2 << 20))
    assert mr.is_handle_owned and mr.device_id == -1 and mr.numa_id == -1
    assert mr.is_host_accessible and mr.is_device_accessible and not mr.is_managed
    s = device.create_stream()
    buf = mr.allocate(256, stream=s)
    buf.fill(0x3C, stream=s)
    s.sync()
    assert ctypes.string_at(int(buf.handle), 256) == b"\x3c" * 256
    other = mr.allocate(256, stream=s)
    buf.copy_to(other, stream=s)
    s.sync()
    assert ctypes.string_at(int(other.handle), 256) == b"\x3c" * 256
    assert buf.device_id == -1 and buf.is_host_accessible
    buf.close(s)
    other.close(s)
    s.sync()
    mr.close()
    s.close()


@pytest.mark.skipif(FAKE, reason="the fake driver has no current host pool (cuMemGetMemPool)")
def test_pinned_resource_without_options_uses_the_current_host_pool(cc, device):
    if not device.properties.host_memory_pools_supported:
        pytest.skip("no host memory pools")
    mr = cc.PinnedMemoryResource()
    assert not mr.is_handle_owned
    s = device.create_stream()
    buf = mr.allocate(64, stream=s)
    buf.fill(7, stream=s)
    s.sync()
    assert ctypes.string_at(int(buf.handle), 64) == b"\x07" * 64
    buf.close(s)
    s.close()


@pytest.mark.skipif(FAKE, reason="the fake driver has no managed memory pools")
def test_managed_resource_and_its_buffers(cc, device):
    from ironaccel_cuda_compat.cuda_core._memory._managed_buffer import _get_int_attr
    from ironaccel_cuda_compat.cuda_core._utils.cuda_utils import driver

    if not device.properties.concurrent_managed_access:
        pytest.skip("no concurrent managed access")
    with pytest.raises(ValueError, match="must be a device ordinal"):
        cc.ManagedMemoryResource(cc.ManagedMemoryResourceOptions(preferred_location_type="device"))
    with pytest.raises(ValueError, match="must be None"):
        cc.ManagedMemoryResource(cc.ManagedMemoryResourceOptions(preferred_location=0, preferred_location_type="host"))
    mr = cc.ManagedMemoryResource(cc.ManagedMemoryResourceOptions(preferred_location=0))
    assert mr.preferred_location == ("device", 0) and mr.device_id == 0 and mr.is_managed
    s = device.create_stream()
    page = 1 << 16
    a, b = mr.allocate(page, stream=s), mr.allocate(page, stream=s)
    assert isinstance(a, cc.ManagedBuffer) and a.is_managed
    a.fill(0x11, stream=s)
    s.sync()
    assert ctypes.string_at(int(a.handle), page) == b"\x11" * page  # the host reads managed memory directly
    last = driver.CUmem_range_attribute.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION
    a.prefetch(cc.Host(), stream=s)
    s.sync()
    assert _get_int_attr(a, last) == -1
    cc.utils.prefetch_batch(s, [a, b], device)
    s.sync()
    assert _get_int_attr(a, last) == 0 and _get_int_attr(b, last) == 0
    with pytest.raises(TypeError, match="sequence of Buffers"):
        cc.utils.prefetch_batch(s, a, device)
    with pytest.raises(ValueError, match="length"):
        cc.utils.prefetch_batch(s, [a, b], [device])
    with pytest.raises(ValueError, match="location is required"):
        a.prefetch(None, stream=s)
    a.close(s)
    b.close(s)
    s.sync()
    mr.close()
    s.close()


@pytest.mark.skipif(FAKE, reason="the fake driver keeps no managed-range advice")
def test_managed_buffer_advice_round_trips(cc, device):
    if not device.properties.concurrent_managed_access:
        pytest.skip("no concurrent managed access")
    from ironaccel_cuda_compat.cuda_core._utils.cuda_utils import call, driver

    ptr = int(call("cuMemAllocManaged", 1 << 16, 1))
    try:
        buf = cc.ManagedBuffer.from_handle(ptr, 1 << 16)
        assert buf.read_mostly is False
        buf.read_mostly = True
        assert buf.read_mostly is True
        buf.preferred_location = device
        got = buf.preferred_location
        assert isinstance(got, cc.Device) and got.device_id == 0
        buf.preferred_location = cc.Host()
        assert buf.preferred_location is cc.Host()
        buf.preferred_location = None
        assert buf.preferred_location is None
        assert device not in buf.accessed_by
        buf.accessed_by.add(device)
        assert set(buf.accessed_by) == {device}
        buf.accessed_by = {device, cc.Host()}
        assert cc.Host() in buf.accessed_by
        with pytest.raises(ValueError, match="location_type='host_numa'"):
            buf.accessed_by.add(cc.Host(numa_id=0))
        buf.accessed_by = set()
        assert len(buf.accessed_by) == 0
    finally:
        call("cuMemFree", driver.CUdeviceptr(ptr))
    plain = cc.DeviceMemoryResource(device).allocate(4096, stream=device.default_stream)
    wrapped = cc.ManagedBuffer.from_handle(plain.handle, plain.size)
    with pytest.raises(ValueError, match="managed-memory allocation"):
        wrapped.read_mostly = True
    plain.close()


def test_memory_resources_check_the_streams_capture(cc, device):
    """Graph memory only on a capturing stream; pool memory only on one that is not (the driver's capture status)."""
    s = device.create_stream()
    gmr = cc.GraphMemoryResource(device)
    with pytest.raises(RuntimeError, match="non-capturing stream"):
        gmr.allocate(64, stream=s)
    attrs = gmr.attributes  # the device's graph-memory counters
    assert attrs.used_mem_high >= attrs.used_mem_current >= 0 and attrs.reserved_mem_current >= 0
    attrs.used_mem_high = 0
    attrs.reserved_mem_high = 0
    with pytest.raises(AttributeError, match="may only be set to zero"):
        attrs.reserved_mem_high = 5
    with pytest.raises(AttributeError, match="is not writable"):
        attrs.reserved_mem_current = 0
    gmr.trim()
    dmr = cc.DeviceMemoryResource(device)
    pmr = None  # a pool of its own: the GPU needs host memory pools
    if FAKE or device.properties.host_memory_pools_supported:
        pmr = cc.PinnedMemoryResource(options=cc.PinnedMemoryResourceOptions(max_size=1 << 24))
    gb = device.create_graph_builder().begin_building("thread_local")
    try:
        with pytest.raises(RuntimeError, match="DeviceMemoryResource cannot perform memory operations on a capturing"):
            dmr.allocate(64, stream=gb)
        if pmr is not None:
            with pytest.raises(RuntimeError, match="cannot perform memory operations on a capturing stream"):
                pmr.allocate(64, stream=gb)
    finally:
        gb.end_building()
    if pmr is not None:
        pmr.allocate(64, stream=gb).close(s)  # the capture has ended
    s.sync()
    s.close()


def test_virtual_memory_resource_grows_and_keeps_the_data(cc, device):
    if not device.properties.virtual_memory_management_supported:
        pytest.skip("no virtual memory management")
    with pytest.raises(ValueError, match="Unsupported granularity"):
        cc.VirtualMemoryResourceOptions._granularity_to_driver("bogus")
    with pytest.raises(NotImplementedError):
        cc.VirtualMemoryResource(device, config=cc.VirtualMemoryResourceOptions(location_type="host"))
    mr = cc.VirtualMemoryResource(device, config=cc.VirtualMemoryResourceOptions(granularity="minimum"))
    buf = mr.allocate(4096)
    size = buf.size
    assert size >= 4096 and size % 4096 == 0 and buf.device_id == 0 and buf.memory_resource is mr
    s = device.create_stream()
    buf.fill(0x6B, stream=s)
    s.sync()
    assert mr.modify_allocation(buf, 1024) is buf and buf.size == size  # smaller: unchanged
    grown = mr.modify_allocation(buf, size + 1)
    assert grown is buf and buf.size > size
    assert _host_bytes(cc, device, buf)[:size] == b"\x6b" * size
    buf.close()
    assert buf.is_closed
    s.close()
