"""DriverPool: the default pool's raised release threshold, created device and host pools, attributes, access,
bad input."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import ironaccel_cuda as cu
from ironaccel import ClosedError, DType, InvalidArgument, OutOfMemory, Unsupported
from ironaccel_cuda.driver_pool import ENV_RELEASE_THRESHOLD, MAX_THRESHOLD, device_attribute, parse_threshold

pytestmark = pytest.mark.backend("cuda")

MiB = 1 << 20


@pytest.fixture
def default_pool(dev):
    pool = dev.default_pool
    before = pool.release_threshold
    yield pool
    pool.release_threshold = before


def test_default_pool_threshold_is_raised_at_first_use(dev, default_pool):
    if ENV_RELEASE_THRESHOLD not in os.environ:
        assert default_pool.release_threshold == MAX_THRESHOLD
    assert dev.default_pool is default_pool and repr(default_pool).startswith("<DriverPool default")
    default_pool.release_threshold = MAX_THRESHOLD
    dev.synchronize()
    buf = dev.alloc(64 * MiB)
    buf.close()
    dev.synchronize()
    usage = default_pool.usage()
    assert usage.reserved - usage.used >= 64 * MiB  # freed, synchronized, and still in the pool
    default_pool.release_threshold = 0
    buf = dev.alloc(64 * MiB)
    buf.close()
    dev.synchronize()
    usage = default_pool.usage()
    assert usage.reserved - usage.used < 64 * MiB  # threshold 0: the synchronize gave it back
    assert dev.pool_usage() == (usage.used, usage.reserved)


@pytest.mark.parametrize("wait", ["stream", "event"])
def test_threshold_0_trims_at_a_stream_or_event_synchronize(dev, default_pool, wait):
    """The driver trims a pool at a synchronize; an idle-stream shortcut must not skip that.

    Before the fix, Stream.synchronize on an idle stream only queried it, so a
    threshold of 0 kept every freed byte (the H200 bench: 6 us per
    64 MiB alloc+free+sync against the peers' 244 us of real release).
    """
    s = dev.create_stream()
    default_pool.release_threshold = 0
    try:
        dev.synchronize()
        buf = dev.alloc(64 * MiB, stream=s)
        s.synchronize()
        buf.close()
        if wait == "stream":
            s.synchronize()
        else:
            s.record().synchronize()
        usage = default_pool.usage()
        assert usage.reserved - usage.used < 64 * MiB
    finally:
        default_pool.release_threshold = MAX_THRESHOLD
        s.close()


def test_default_pool_is_the_allocator_of_device_alloc(dev, default_pool):
    s = dev.create_stream()
    buf = default_pool.allocate(1000, "float32", stream=s)
    assert isinstance(buf, cu.DeviceBuf) and buf.dtype is DType.FLOAT32 and buf.size == 1000
    buf.copy_from(np.arange(1000, dtype=np.float32))
    np.testing.assert_array_equal(buf.copy_to_host(), np.arange(1000, dtype=np.float32))
    default_pool.deallocate(buf, s)
    assert buf.closed
    default_pool.close()  # never destroyed
    assert not default_pool.closed
    default_pool.allocate(8).close()
    s.close()


@pytest.mark.parametrize("setting, expected", [(None, MAX_THRESHOLD), ("keep", 0), ("8GiB", 8 << 30), ("0", 0),
                                               ("max", MAX_THRESHOLD), ("4096", 4096), ("bogus", "InvalidArgument")])
def test_environment_chooses_the_threshold(setting, expected):
    """In a fresh process: unset, the first open raises the threshold; the variable says otherwise."""
    code = (
        "import ironaccel, ironaccel_cuda as cu\n"
        "try:\n"
        "    print(cu.Device(0).default_pool.release_threshold)\n"
        "except ironaccel.InvalidArgument as exc:\n"
        "    print('InvalidArgument', exc.op)\n"
    )
    env = dict(os.environ)
    env.pop(ENV_RELEASE_THRESHOLD, None)
    if setting is not None:
        env[ENV_RELEASE_THRESHOLD] = setting
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    if expected == "InvalidArgument":
        assert words == ["InvalidArgument", ENV_RELEASE_THRESHOLD]
    else:
        assert int(words[0]) == expected


def test_parse_threshold():
    assert parse_threshold("") == parse_threshold(" MAX ") == MAX_THRESHOLD
    assert parse_threshold("keep") is None
    assert parse_threshold("3 MiB") == 3 * MiB and parse_threshold("2k") == 2048 and parse_threshold("1T") == 1 << 40
    for bad in ("-1", "1.5G", "12 parsecs", str(1 << 64)):
        with pytest.raises(InvalidArgument):
            parse_threshold(bad)


def test_created_pool_buffers_are_devicebufs(dev, kernels):
    pool = dev.create_driver_pool()
    s = dev.create_stream()
    n = 5000
    x = np.arange(n, dtype=np.float32)
    dx, dy = pool.allocate(n, "float32", stream=s), pool.allocate(n, "float32", stream=s)
    assert pool.outstanding() == 2 * n * 4
    dx.copy_from(x, stream=s)
    dy.memset(0, stream=s)
    kernels.function("saxpy").launch((n + 255) // 256, 256, 3.0, dx, dy, n, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(dy.copy_to_host(), 3 * x)
    view = dy[100:200]
    np.testing.assert_array_equal(view.copy_to_host(), 3 * x[100:200])
    assert dy.__cuda_array_interface__["data"][0] == dy.ptr
    capsule = dy.__dlpack__(stream=-1)
    del capsule
    pool.deallocate(dx)
    dy.close()
    assert view.closed and pool.outstanding() == 0
    pool.close()
    s.close()


def test_threshold_usage_trim_and_high_water(dev):
    pool = dev.create_driver_pool(release_threshold=0)
    assert pool.release_threshold == 0
    buf = pool.allocate(4 * MiB)
    u = pool.usage()
    assert u.used >= 4 * MiB and u.reserved >= u.used and u.used_high >= 4 * MiB and u.reserved_high >= u.reserved
    buf.close()
    dev.synchronize()
    u = pool.usage()
    assert u.used == 0 and u.reserved == 0 and u.used_high >= 4 * MiB
    pool.release_threshold = 1 << 30
    pool.allocate(4 * MiB).close()
    dev.synchronize()
    assert pool.usage().reserved >= 4 * MiB  # kept below the threshold
    pool.trim()
    assert pool.usage().reserved == 0
    pool.reset_high_water()
    u = pool.usage()
    assert u.used_high == 0 and u.reserved_high == 0
    pool.close()


def test_reuse_flags(dev):
    pool = dev.create_driver_pool()
    for name in ("reuse_follow_event_dependencies", "reuse_allow_opportunistic", "reuse_allow_internal_dependencies"):
        assert getattr(pool, name) is True  # the driver's defaults
        setattr(pool, name, False)
        assert getattr(pool, name) is False
        setattr(pool, name, True)
        assert getattr(pool, name) is True
        with pytest.raises(InvalidArgument):
            setattr(pool, name, 1)
    pool.close()


def test_max_size_caps_the_pool(dev):
    pool = dev.create_driver_pool(max_size=64 * MiB)
    assert pool.max_size == 64 * MiB
    first = pool.allocate(32 * MiB)
    with pytest.raises(OutOfMemory) as info:
        pool.allocate(64 * MiB)
    assert info.value.op == "cuMemAllocFromPoolAsync"
    first.close()
    pool.close()


def test_host_pool_memory_is_shared_by_host_and_device(dev, kernels):
    if not device_attribute(dev, "HOST_MEMORY_POOLS_SUPPORTED"):
        with pytest.raises(Unsupported):
            dev.create_driver_pool(host=True)
        return
    pool = dev.create_driver_pool(host=True)
    assert pool.kind == "host" and pool.access(dev) == "readwrite"
    n = 4096
    src = pool.allocate(n, "float32")
    out = dev.alloc(n, "float32")
    dev.synchronize()
    cu.host_array(src)[:] = np.arange(n, dtype=np.float32)  # written by the host, read by a kernel
    kernels.function("scale_offset").launch((n + 255) // 256, 256, src, out, 2.0, 1.0, n)
    np.testing.assert_array_equal(out.copy_to_host(), 2 * np.arange(n, dtype=np.float32) + 1)
    dst = pool.allocate(n, "float32")
    kernels.function("scale_offset").launch((n + 255) // 256, 256, out, dst, 1.0, -1.0, n)
    dev.synchronize()
    np.testing.assert_array_equal(cu.host_array(dst), 2 * np.arange(n, dtype=np.float32))  # kernel wrote host memory
    for b in (src, dst, out):
        b.close()
    dev.synchronize()
    assert pool.usage().used == 0
    with pytest.raises(InvalidArgument):
        dev.create_driver_pool(host=True, ipc=True)
    pool.close()


def test_closed_pools_and_surviving_buffers(dev):
    other = cu.Device(0)
    pool = other.create_driver_pool()
    buf = pool.allocate(1024, "int32")
    other.close()  # closes the pools it created
    assert pool.closed and "closed" in repr(pool)
    for call in (lambda: pool.allocate(4), lambda: pool.usage(), lambda: pool.trim(), lambda: pool.handle,
                 lambda: setattr(pool, "release_threshold", 0), lambda: pool.grant_access(dev)):
        with pytest.raises(ClosedError):
            call()
    pool.close()  # idempotent
    buf.memset(1)  # an outstanding buffer outlives its pool
    assert (buf.copy_to_host() == 1).all()
    buf.close()
    buf.close()


def test_deallocate_on_another_stream_and_ownership(dev):
    pool, other = dev.create_driver_pool(), dev.create_driver_pool()
    s1, s2 = dev.create_stream(), dev.create_stream()
    buf = pool.allocate(1 << 16, stream=s1)
    s2.wait(s1.record())
    buf.memset(7, stream=s2)
    pool.deallocate(buf, s2)  # freed after s2's work: s1 waits for s2 first
    assert buf.closed
    with pytest.raises(ClosedError):
        pool.deallocate(buf)
    mine = pool.allocate(64)
    with pytest.raises(InvalidArgument, match="not allocated here"):
        other.deallocate(mine)
    with pytest.raises(InvalidArgument, match="not allocated here"):
        pool.deallocate(mine[8:16])
    with pytest.raises(InvalidArgument):
        pool.deallocate(np.zeros(4))
    with pytest.raises(InvalidArgument):
        pool.deallocate(mine, stream="s2")
    s2.close()
    with pytest.raises(ClosedError):
        pool.deallocate(mine, stream=s2)
    pool.deallocate(mine, stream=s1)
    for x in (pool, other, s1):
        x.close()


def test_bad_input(dev):
    for max_size in (-1, 1 << 64, 1.5, True):  # 1 << 64 was an OverflowError from the binding, naming nothing
        with pytest.raises(InvalidArgument, match="max_size"):
            dev.create_driver_pool(max_size=max_size)
    pool = dev.create_driver_pool()
    for size in (0, -1, 1.5, True, "8", 1 << 62):
        with pytest.raises(InvalidArgument) as info:
            pool.allocate(size)
        assert info.value.op == "cuMemAllocFromPoolAsync"
    with pytest.raises(InvalidArgument):
        pool.allocate(8, "not-a-dtype")
    with pytest.raises(InvalidArgument):
        pool.allocate(8, stream=0)
    closed_stream = dev.create_stream()
    closed_stream.close()
    with pytest.raises(ClosedError):
        pool.allocate(8, stream=closed_stream)
    for bad in (-1, 1 << 64, 1.0, None, True):
        with pytest.raises(InvalidArgument):
            pool.release_threshold = bad
    with pytest.raises(InvalidArgument):
        pool.trim(-1)
    with pytest.raises(InvalidArgument):
        pool.grant_access(dev, "write")
    with pytest.raises(InvalidArgument):
        pool.grant_access(dev, "read")  # a pool is always read-write for its own device
    pool.grant_access(dev)  # ... which may be said
    with pytest.raises(InvalidArgument):
        pool.grant_access(99)
    with pytest.raises(InvalidArgument):
        pool.access("cuda:0")
    for kwargs in ({"host": "yes"}, {"ipc": 1}, {"max_size": -1}, {"max_size": 1.5}, {"release_threshold": -5}):
        with pytest.raises(InvalidArgument):
            dev.create_driver_pool(**kwargs)
    with pytest.raises(TypeError):
        cu.DriverPool()
    pool.close()


@pytest.mark.multi_gpu
def test_pool_access_for_a_peer(two, kernel_code):
    d0, d1 = two
    if not d1.can_access_peer(d0):
        pytest.fail("the two GPUs have no peer path")
    pool = d0.create_driver_pool()
    assert pool.access(d1) == "none"
    pool.grant_access(d1)
    assert pool.access(d1) == "readwrite"
    n = 1024
    src = pool.allocate(n, "float32")
    src.copy_from(np.arange(n, dtype=np.float32))
    out = d1.alloc(n, "float32")
    d1.enable_peer_access(d0)
    fn = d1.load_module(kernel_code).function("scale_offset")
    fn.launch(4, 256, src, out, 1.0, 0.5, n)  # a kernel on cuda:1 reads cuda:0's pool memory
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(n, dtype=np.float32) + 0.5)
    pool.grant_access(d1, "none")
    assert pool.access(d1) == "none"
    for x in (src, out, pool):
        x.close()
