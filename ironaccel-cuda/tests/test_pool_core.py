"""The MemPool's bucket cache of the pure-Python hot path (`_hotpy.PoolCore`) on the CPU, with the driver calls
replaced by a counting fake.  (The compiled PoolCore runs the same behaviours in the fake-driver GPU suite.)"""

from __future__ import annotations

import itertools
import threading
from types import SimpleNamespace

import pytest

pytest.importorskip("cuda.bindings.driver")

from ironaccel_cuda import _hotpy as _hot


class FakeDriver:
    """Stands in for cuMemAllocAsync / cuMemFreeAsync: hands out unique addresses and checks frees."""

    def __init__(self):
        self.lock = threading.Lock()
        self.next = itertools.count(0x1000, 0x1000)
        self.live: dict[int, int] = {}
        self.allocs = self.frees = 0
        self.streams: list = []

    def alloc(self, nbytes, stream):
        with self.lock:
            ptr = next(self.next)
            self.live[ptr] = nbytes
            self.allocs += 1
            self.streams.append(stream)
            return ptr

    def free(self, dp, stream):
        with self.lock:
            assert dp in self.live, f"double or foreign free of {dp:#x}"
            del self.live[dp]
            self.frees += 1
            self.streams.append(stream)


@pytest.fixture
def driver(monkeypatch):
    fake = FakeDriver()
    monkeypatch.setattr(_hot, "mem_alloc_async", fake.alloc)
    monkeypatch.setattr(_hot, "mem_free_async", fake.free)
    return fake


def make_core(**kwargs):
    stream = SimpleNamespace(_h="pool-stream")
    opts = {"min_block": 256, "max_block": 1 << 20, "front_depth": 4, "max_bytes": 1 << 30} | kwargs
    return _hot.PoolCore(stream, "default-stream", **opts), stream


def test_buckets_hits_and_misses(driver):
    core, _ = make_core()
    entry = core.take(1000)
    addr, dp, b = entry
    assert b == 10 and driver.live[dp] == 1024 and addr == dp
    core.give(entry)
    again = core.take(600)  # same bucket: the very same entry comes back
    assert again is entry
    small = core.take(1)
    assert small[2] == 8 and driver.live[small[1]] == 256  # min_block
    st = core.counters()
    assert st["hits"] == 1 and st["misses"] == 2 and st["bytes_reserved"] == 1024 + 256
    assert st["bytes_in_use"] == 1024 + 256 and st["bytes_held"] == 0


def test_over_the_cap(driver):
    core, _ = make_core(max_block=1 << 12)
    entry = core.take((1 << 12) + 1)
    _, dp, b = entry
    assert b == -1 and driver.live[dp] == (1 << 12) + 1
    core.give(entry)
    assert dp not in driver.live and core.counters()["bypass"] == 1 and core.counters()["bytes_held"] == 0


def test_spill_and_refill_through_the_shared_lists(driver):
    core, _ = make_core(front_depth=4)
    blocks = [core.take(512) for _ in range(10)]
    for entry in blocks:
        core.give(entry)
    st = core.counters()
    assert st["blocks_held"] == 10 and st["bytes_in_use"] == 0
    got = []

    def other_thread():
        got.extend(core.take(512) for _ in range(10))

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    # the other thread found the spilled blocks in the shared lists before asking the driver
    assert driver.allocs < 20
    assert len({entry[0] for entry in got}) == 10


def test_max_bytes_bounds_the_shared_lists(driver):
    core, _ = make_core(front_depth=2, max_bytes=1024)
    blocks = [core.take(512) for _ in range(20)]
    for entry in blocks:
        core.give(entry)
    st = core.counters()
    shared = sum(len(lst) << i for i, lst in enumerate(core._shared))
    assert shared <= 1024
    assert st["bytes_reserved"] == st["bytes_held"]  # released blocks left the books
    assert driver.frees > 0 and len(driver.live) == st["blocks_held"]


def test_drain_and_closed_pool(driver):
    core, stream = make_core()
    blocks = [core.take(1 << k) for k in range(8, 16)]
    keep = core.take(4096)
    for entry in blocks:
        core.give(entry)
    released = core.drain()
    assert released == sum(1 << k for k in range(8, 16))
    assert core.counters()["bytes_held"] == 0 and len(driver.live) == 1
    core._closed = True
    core.give(keep)  # after close: straight back to the driver
    assert not driver.live
    stream._h = _hot.CLOSED
    core.give(core.take(256))
    assert driver.streams[-1] == "default-stream"  # the pool's stream is closed: the fallback is used


def test_sixteen_threads_never_share_a_block(driver):
    core, _ = make_core(front_depth=3, max_bytes=1 << 16)
    owned: set[int] = set()
    lock = threading.Lock()
    handoff: list = []
    errors: list = []

    def worker(k):
        try:
            for i in range(2000):
                entry = core.take(256 << (i % 5))
                with lock:
                    assert entry[0] not in owned, "handed out twice"
                    owned.add(entry[0])
                if i % 4 == 0:
                    with lock:
                        handoff.append(entry)
                        other = handoff.pop(0) if len(handoff) > 8 else None
                    if other is not None:
                        with lock:
                            owned.discard(other[0])
                        core.give(other)
                else:
                    with lock:
                        owned.discard(entry[0])
                    core.give(entry)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    for entry in handoff:
        core.give(entry)
    st = core.counters()
    assert st["hits"] + st["misses"] == 16 * 2000
    assert st["bytes_in_use"] == 0 and st["bytes_reserved"] == st["bytes_held"]
    assert st["threads"] == 17  # the 16 workers and this thread (it returned the last hand-offs)
    core.drain()
    assert not driver.live
