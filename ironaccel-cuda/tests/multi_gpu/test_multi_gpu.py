"""Several GPUs: peer access and copies, cross-device checks.  Needs two devices.

Not marked for the backend on purpose: on a one-GPU machine these tests skip
(the reason says so) instead of failing under IRONACCEL_REQUIRE=cuda; the
cross-device checks themselves also run on one GPU (test_memory.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import ironaccel
from ironaccel import InvalidArgument


def test_enumerates_both(two):
    d0, d1 = two
    assert d0.uuid != d1.uuid and d0.pci_bus_id != d1.pci_bus_id


def test_peer_copy(two):
    d0, d1 = two
    data = np.random.default_rng(5).standard_normal(1 << 16).astype(np.float32)
    a = d0.upload(data)
    b = d1.alloc(data.size, "float32")
    b.copy_from(a)  # peer copy on b's stream
    np.testing.assert_array_equal(b.copy_to_host(), data)
    c = d0.alloc(data.size, "float32")
    s1 = d1.create_stream()
    c.copy_from(b, stream=s1)  # a stream of either side is fine
    s1.synchronize()
    np.testing.assert_array_equal(c.copy_to_host(), data)
    for x in (a, b, c):
        x.close()
    s1.close()


def test_copy_peer_between_devices_by_context_address(two):
    """copy_peer between the two devices' primary contexts, named by address, with either (or no) context current."""
    import ironaccel_cuda as cu

    d0, d1 = two
    data = np.random.default_rng(7).standard_normal(1 << 16).astype(np.float32)
    a = d0.alloc(data.size, "float32")
    a.copy_from(data)
    b = d1.alloc(data.size, "float32")
    d0.bind()
    c0 = cu.current_context_handle()
    d1.bind()
    c1 = cu.current_context_handle()
    cu.copy_peer(b.ptr, c1, a.ptr, c0, a.nbytes)  # d1's context current
    np.testing.assert_array_equal(b.copy_to_host(), data)
    c = d0.alloc(data.size, "float32")
    s0 = d0.create_stream()
    cu.copy_peer(c.ptr, c0, b.ptr, c1, b.nbytes, stream=s0)
    s0.synchronize()
    np.testing.assert_array_equal(c.copy_to_host(), data)
    for x in (a, b, c, s0):
        x.close()


def test_cross_device_checks(two, kernel_code):
    d0, d1 = two
    buf1 = d1.alloc(256, "float32")
    s0 = d0.create_stream()
    with pytest.raises(InvalidArgument):
        buf1.copy_from(np.zeros(256, np.float32), stream=s0)
    with pytest.raises(InvalidArgument):
        d1.alloc(16, stream=s0)
    fn = d0.load_module(kernel_code).function("saxpy")
    buf0 = d0.alloc(256, "float32")
    with pytest.raises(InvalidArgument) as info:
        fn.launch(1, 256, 1.0, buf1, buf0, 256)  # cuda:1 memory in a cuda:0 kernel, no peer access
    assert "enable_peer_access" in str(info.value)
    s1 = d1.create_stream()
    with pytest.raises(InvalidArgument):
        fn.launch(1, 256, 1.0, buf0, buf0, 256, stream=s1)
    if d0.can_access_peer(d1):
        d0.enable_peer_access(d1)
        d0.enable_peer_access(d1)  # idempotent
        buf1.memset(0)
        buf0.copy_from(np.ones(256, np.float32))
        fn.launch(1, 256, 2.0, buf0, buf1, 256)  # now allowed: peer memory
        d0.synchronize()
        np.testing.assert_array_equal(buf1.copy_to_host(), np.full(256, 2, np.float32))
    for x in (buf0, buf1, s0, s1):
        x.close()


@pytest.fixture(scope="module")
def kernel_code():
    from helpers.kernels import SOURCE

    import ironaccel_cuda as cu

    if not ironaccel.probe("cuda").available:
        pytest.skip("backend cuda unavailable")
    return cu.Program(SOURCE).compile()


def test_fenced_waits_on_both_devices_from_one_thread(two, monkeypatch):
    """One thread's fence word lives in a page registered portable in one device's primary context (native/fence.h);
    it must serve streams of the other device too.  Waits alternate between the devices, each seeing every byte
    of its own work, and end on the word.  (Not yet run on two GPUs: no such machine was lent.)"""
    from helpers import FAKE

    from ironaccel_cuda import _core

    if FAKE:
        monkeypatch.setenv("FAKE_CUDA_BUSY_QUERIES", "1")  # a fake stream is never busy otherwise
    n = 16 << 10
    streams = [d.create_stream() for d in two]
    bufs = [d.alloc(n, "uint32", stream=s) for d, s in zip(two, streams)]
    hosts = [d.alloc_pinned(n, "uint32") for d in two]
    before = _core.fence_info()["fenced"]
    for i in range(1, 101):
        for k in (1, 0) if i % 2 else (0, 1):
            value = 2 * i + k
            bufs[k].memset(value, stream=streams[k])
            bufs[k].copy_to_host(hosts[k].array, stream=streams[k])
            streams[k].synchronize()
            assert hosts[k].array[0] == value and hosts[k].array[-1] == value, (i, k)
    assert (hosts[1].array == 201).all() and (hosts[0].array == 200).all()
    assert _core.fence_info()["fenced"] - before >= 150
    for x in (*bufs, *hosts, *streams):
        x.close()
