"""MemPool: buckets, warm path, stats, trim/close, cross-thread frees, outliving the pool, shared streams, stress."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

from ironaccel import ClosedError, DType, InvalidArgument

pytestmark = pytest.mark.backend("cuda")


def test_alloc_and_reuse(dev):
    pool = dev.create_pool()
    a = pool.alloc(1000, "float32")
    assert a.size == 1000 and a.nbytes == 4000 and a.dtype is DType.FLOAT32 and a.device is dev
    ptr = a.ptr
    a.close()
    b = pool.alloc(900, "float32")  # same 4 KiB bucket: the same block comes back
    assert b.ptr == ptr
    st = pool.stats()
    assert st.misses == 1 and st.hits == 1 and st.bytes_in_use == 4096 and st.bytes_held == 0
    b.close()
    st = pool.stats()
    assert st.bytes_held == 4096 and st.bytes_in_use == 0 and st.blocks_held == 1
    pool.close()


def test_buckets_are_powers_of_two(dev):
    pool = dev.create_pool(min_block=256)
    sizes = [1, 255, 256, 257, 4095, 4097, 65536, 1 << 20]
    bufs = [pool.alloc(n) for n in sizes]
    st = pool.stats()
    expected = sum(max(256, 1 << (n - 1).bit_length()) for n in sizes)
    assert st.bytes_reserved == expected and st.misses == len(sizes)
    for b in bufs:
        b.close()
    assert pool.stats().bytes_held == expected
    pool.close()


def test_pooled_buffer_is_a_devicebuf(dev, kernels):
    pool = dev.create_pool()
    n = 5000
    x = np.arange(n, dtype=np.float32)
    dx, dy = pool.alloc(n, "float32"), pool.alloc(n, "float32")
    dx.copy_from(x)
    dy.memset(0)
    kernels.function("saxpy").launch((n + 255) // 256, 256, 2.0, dx, dy, n)
    np.testing.assert_array_equal(dy.copy_to_host(), 2 * x)
    view = dy[10:20]
    np.testing.assert_array_equal(view.copy_to_host(), 2 * x[10:20])
    cai = dy.__cuda_array_interface__
    assert cai["data"][0] == dy.ptr and cai["shape"] == (n,)
    capsule = dy.__dlpack__()
    del capsule
    other = dev.alloc(n, "float32")
    other.copy_from(dy)
    np.testing.assert_array_equal(other.copy_to_host(), 2 * x)
    for b in (dx, dy, other):
        b.close()
    assert view.closed
    pool.close()


def test_over_the_cap_goes_to_the_driver(dev):
    pool = dev.create_pool(max_block=1 << 16)
    dev.synchronize()
    before = dev.pool_usage()[0]
    big = pool.alloc((1 << 16) + 1)
    st = pool.stats()
    assert st.bypass == 1 and st.misses == 0 and st.bytes_reserved == 0
    big.close()
    dev.synchronize()
    assert dev.pool_usage()[0] == before  # freed, not cached
    assert pool.stats().bytes_held == 0
    pool.close()


def test_trim_and_close_release_everything(dev):
    dev.synchronize()
    before = dev.pool_usage()[0]
    pool = dev.create_pool()
    bufs = [pool.alloc(1 << k) for k in range(8, 20)]
    for b in bufs:
        b.close()
    assert pool.stats().bytes_held > 0
    released = pool.trim()
    assert released > 0 and pool.stats().bytes_held == 0
    dev.synchronize()
    assert dev.pool_usage()[0] == before
    for b in [pool.alloc(4096) for _ in range(10)]:
        b.close()
    pool.close()
    pool.close()
    dev.synchronize()
    assert dev.pool_usage()[0] == before
    with pytest.raises(ClosedError):
        pool.alloc(16)


def test_free_from_another_thread(dev):
    pool = dev.create_pool()
    bufs = [pool.alloc(1024) for _ in range(100)]
    t = threading.Thread(target=lambda: [b.close() for b in bufs])
    t.start()
    t.join()
    st = pool.stats()
    assert st.bytes_in_use == 0 and st.blocks_held == 100 and st.threads == 2
    again = [pool.alloc(1024) for _ in range(100)]  # this thread's list is empty: refills from the other's spill
    assert pool.stats().misses <= 100 + 100
    for b in again:
        b.close()
    assert pool.stats().bytes_in_use == 0
    pool.close()


def test_buffer_outlives_its_pool(dev):
    dev.synchronize()
    before = dev.pool_usage()[0]
    pool = dev.create_pool()
    keep = pool.alloc(1 << 20, "float32")
    keep.memset(0)
    pool.close()
    keep.copy_from(np.ones(1 << 20, np.float32))  # still a working buffer
    np.testing.assert_array_equal(keep.copy_to_host()[:4], np.ones(4, np.float32))
    keep.close()  # goes to the driver, not to the closed pool
    dev.synchronize()
    assert dev.pool_usage()[0] == before
    del pool
    gc.collect()


def test_two_pools_on_one_stream(dev):
    s = dev.create_stream()
    p1, p2 = dev.create_pool(s), dev.create_pool(s)
    a = p1.alloc(4096)
    a_ptr = a.ptr
    a.close()
    b = p2.alloc(4096)
    assert b.ptr != a_ptr  # p2 never sees p1's cached block
    assert p1.stats().bytes_held == 4096 and p2.stats().bytes_in_use == 4096
    b.close()
    p1.close()
    p2.close()
    s.close()


def test_pool_on_a_closed_stream(dev):
    s = dev.create_stream()
    pool = dev.create_pool(s)
    b = pool.alloc(4096)
    s.close()
    b.close()
    pool.close()  # released on the default stream instead


def test_bad_pool_input(dev):
    for kwargs in ({"max_block": 1000}, {"min_block": 3}, {"front_depth": 0}, {"max_bytes": -1},
                   {"min_block": 1 << 20, "max_block": 1 << 10}):
        with pytest.raises(InvalidArgument):
            dev.create_pool(**kwargs)
    with pytest.raises(InvalidArgument):
        dev.create_pool(stream="s")
    pool = dev.create_pool()
    for size in (0, -1, 1.5, 2**62):
        with pytest.raises(InvalidArgument):
            pool.alloc(size)
    pool.close()


def test_device_close_closes_its_pools():
    import ironaccel_cuda as cu

    d = cu.Device(0)
    pool = d.create_pool()
    pool.alloc(64).close()
    d.close()
    assert pool.closed


def test_stress_16_threads(dev):
    """16 threads allocate, write a private pattern, check it and free -- some frees on other threads."""
    dev.synchronize()
    before = dev.pool_usage()[0]
    pool = dev.create_pool(front_depth=4, max_bytes=1 << 24)
    owned: set[int] = set()
    owned_lock = threading.Lock()
    handoff: list = []
    errors: list = []
    iterations = 150
    sizes = [64, 256, 1000, 4096, 10_000, 65_536]

    def take(nbytes):
        buf = pool.alloc(nbytes)
        with owned_lock:
            if buf.ptr in owned:
                raise AssertionError(f"block {buf.ptr:#x} handed out twice")
            owned.add(buf.ptr)
        return buf

    def give(buf):
        with owned_lock:
            owned.discard(buf.ptr)
        buf.close()

    def worker(k):
        try:
            s = dev.create_stream()
            rng = np.random.default_rng(k)
            for i in range(iterations):
                nbytes = sizes[rng.integers(len(sizes))]
                buf = take(nbytes)
                pattern = np.full(nbytes, (k * 31 + i) % 251, np.uint8)
                buf.copy_from(pattern)
                assert np.array_equal(buf.copy_to_host(), pattern)
                if i % 3 == 0:
                    with owned_lock:
                        handoff.append(buf)  # freed later by some other thread
                else:
                    give(buf)
                if i % 5 == 0:
                    with owned_lock:
                        other = handoff.pop() if handoff else None
                    if other is not None:
                        give(other)
            s.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    for buf in handoff:
        give(buf)
    st = pool.stats()
    assert st.hits + st.misses == 16 * iterations
    assert st.bytes_in_use == 0 and st.bytes_reserved == st.bytes_held
    assert st.hits > st.misses
    pool.close()
    dev.synchronize()
    assert dev.pool_usage()[0] == before


def test_spill_and_refill_through_the_shared_lists(dev):
    pool = dev.create_pool(front_depth=4)
    bufs = [pool.alloc(512) for _ in range(10)]
    for b in bufs:
        b.close()
    st = pool.stats()
    assert st.blocks_held == 10 and st.bytes_in_use == 0 and st.misses == 10
    got = []
    t = threading.Thread(target=lambda: got.extend(pool.alloc(512) for _ in range(10)))
    t.start()
    t.join()
    # the other thread found the spilled blocks in the shared lists before asking the driver
    assert pool.stats().misses < 20
    assert len({b.ptr for b in got}) == 10
    for b in got:
        b.close()
    pool.close()


def test_max_bytes_bounds_the_shared_lists(dev):
    pool = dev.create_pool(front_depth=2, max_bytes=1024)
    bufs = [pool.alloc(512) for _ in range(20)]
    for b in bufs:
        b.close()
    st = pool.stats()
    assert st.bytes_reserved == st.bytes_held < 20 * 512  # blocks past the bound went back to the driver
    assert st.bytes_held <= 2 * 512 + 1024  # the closing thread's list (front_depth) plus the shared bound
    pool.close()


def test_pool_alloc_in_a_forked_child_is_refused(dev):
    import os

    pool = dev.create_pool()
    pool.alloc(256).close()  # warm: the thread-local list holds a block
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            pool.alloc(256)
            msg = b"allocated"
        except Exception as exc:
            msg = f"{type(exc).__name__}".encode()
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    got = os.read(r, 100)
    os.waitpid(pid, 0)
    os.close(r)
    assert got == b"InvalidState"
    pool.close()
