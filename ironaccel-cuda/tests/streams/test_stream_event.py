"""Streams and events: create, default stream, sync/query/wait/record, interop, timing, reuse, closed objects."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from helpers import FAKE

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument
from ironaccel_cuda import _core

pytestmark = pytest.mark.backend("cuda")

SPIN_CYCLES = 50_000_000  # ~25 ms on a ~2 GHz SM clock


def test_create_stream(dev):
    s = dev.create_stream()
    assert s.non_blocking is True and s.priority == 0 and s.device is dev
    assert s.handle != 0
    s.synchronize()
    assert s.query() is True
    s.close()
    blocking = dev.create_stream(priority=-1, non_blocking=False)
    assert blocking.non_blocking is False and blocking.priority == -1
    blocking.close()


def test_default_stream_is_permanent(dev):
    s = dev.default_stream
    assert s is dev.default_stream
    s.close()  # the default stream cannot be closed
    s.synchronize()
    assert not s.closed


def test_query_sees_running_work(dev, kernels):
    s = dev.create_stream()
    kernels.function("spin").launch(1, 1, SPIN_CYCLES, stream=s)
    if not FAKE:
        assert s.query() is False
    s.synchronize()
    assert s.query() is True
    s.close()


def test_wait_orders_streams(dev, kernels):
    producer, consumer = dev.create_stream(), dev.create_stream()
    n = 1 << 16
    x = dev.alloc(n, "float32", stream=producer)
    y = dev.alloc(n, "float32", stream=producer)
    x.copy_from(np.ones(n, np.float32), stream=producer)
    y.memset(0, stream=producer)
    kernels.function("spin").launch(1, 1, SPIN_CYCLES // 5, stream=producer)
    kernels.function("saxpy").launch((n + 255) // 256, 256, 2.0, x, y, n, stream=producer)
    done = producer.record()
    consumer.wait(done)
    out = np.empty(n, np.float32)
    y.copy_to_host(out, stream=consumer)
    consumer.synchronize()
    np.testing.assert_array_equal(out, np.full(n, 2, np.float32))
    for b in (x, y):
        b.close()
    done.close()
    producer.close()
    consumer.close()


def test_record_returns_event(dev):
    s = dev.create_stream()
    e = s.record()
    assert isinstance(e, cu.Event) and e.timing is False
    e.synchronize()
    assert e.query() is True
    mine = dev.create_event()
    assert s.record(mine) is mine
    e.close()
    mine.close()
    s.close()


def test_cuda_stream_protocol_and_foreign_handle(dev):
    s = dev.create_stream()
    version, handle = s.__cuda_stream__()
    assert version == 0 and handle == s.handle
    wrapper = cu.Stream.from_handle(handle, dev)
    wrapper.synchronize()
    assert wrapper.handle == handle
    wrapper.close()  # non-owning: the stream itself stays valid
    s.synchronize()
    also = cu.Stream.from_handle(s, dev)  # anything with __cuda_stream__
    assert also.handle == handle
    s.close()
    with pytest.raises(InvalidArgument):
        cu.Stream.from_handle("nope", dev)


def test_any_stream_by_handle(dev):
    """stream_priority / stream_non_blocking / stream_device_ordinal: the driver's answers for a bare CUstream."""
    least, greatest = dev.stream_priority_range
    urgent = dev.create_stream(priority=greatest)
    blocking = dev.create_stream(priority=least, non_blocking=False)
    assert cu.stream_priority(urgent.handle) == cu.stream_priority(urgent) == greatest
    assert cu.stream_priority(blocking) == least
    assert cu.stream_non_blocking(urgent.handle) is True and cu.stream_non_blocking(blocking) is False
    streams = [urgent, blocking]
    ctx = None if FAKE else dev.create_context()  # the fake driver's created contexts are the primary one
    if ctx is not None:
        streams.append(ctx.create_stream(non_blocking=False))
        assert cu.stream_non_blocking(streams[-1]) is False
    before = cu.current_context_handle()
    for s in streams:
        assert cu.stream_device_ordinal(s.handle) == cu.stream_device_ordinal(s) == 0
    assert cu.current_context_handle() == before  # each stream's context was pushed and popped again
    for query, op in ((cu.stream_priority, "cuStreamGetPriority"), (cu.stream_non_blocking, "cuStreamGetFlags"),
                      (cu.stream_device_ordinal, "cuStreamGetCtx")):
        for bad in ("nope", -1, 1 << 64, True, 1.5):
            with pytest.raises(InvalidArgument) as info:
                query(bad)
            assert info.value.op == op and info.value.code is None
    for s in (urgent, blocking):
        s.close()
    if ctx is not None:
        ctx.close()


def test_release_hands_the_stream_over(dev):
    """release(): the CUstream lives on, the Stream is closed and destroys nothing, even when collected."""
    from ironaccel_cuda._driver import call

    least, greatest = dev.stream_priority_range
    s = dev.create_stream(priority=greatest, non_blocking=False)
    h = s.release()
    assert s.closed and isinstance(h, int) and h != 0
    with pytest.raises(ClosedError):
        s.release()
    s.close()  # nothing to do
    del s
    gc.collect()
    assert cu.stream_priority(h) == greatest and cu.stream_non_blocking(h) is False  # still alive
    taken = cu.Stream.from_handle(h, dev)
    buf = dev.alloc(64, "float32", stream=taken)
    buf.memset(0, stream=taken)
    taken.synchronize()
    buf.close()
    taken.close()  # a wrapper that does not own it: the stream stays
    call("cuStreamDestroy", h)  # its new owner's to destroy
    for permanent in (dev.default_stream, dev.legacy_stream, dev.per_thread_stream):
        with pytest.raises(InvalidArgument):
            permanent.release()
        assert not permanent.closed


def test_event_timing(dev, kernels):
    s = dev.create_stream()
    start, end = dev.create_event(timing=True), dev.create_event(timing=True)
    start.record(s)
    kernels.function("spin").launch(1, 1, SPIN_CYCLES, stream=s)
    end.record(s)
    end.synchronize()
    ms = end.elapsed_ms(start)
    assert isinstance(ms, float) and ms >= 0
    if not FAKE:
        assert ms > 0.5
    untimed = dev.create_event()
    untimed.record(s)
    untimed.synchronize()
    with pytest.raises(InvalidArgument) as info:
        untimed.elapsed_ms(start)
    assert info.value.op == "cuEventElapsedTime"
    # any two events, by Event or by CUevent address: the driver's measure and its typed errors
    assert cu.event_elapsed_ms(start, end) == cu.event_elapsed_ms(start.handle, end.handle) == ms
    for a, b in ((start, untimed), (untimed.handle, end.handle)):
        with pytest.raises(InvalidArgument) as info:
            cu.event_elapsed_ms(a, b)
        assert info.value.op == "cuEventElapsedTime" and info.value.code == 400  # CUDA_ERROR_INVALID_HANDLE
    never = dev.create_event(timing=True)
    with pytest.raises(InvalidArgument) as info:
        cu.event_elapsed_ms(start, never)  # never recorded
    assert info.value.code == 400
    for bad in ("start", 0, -1, 1 << 64, True, None):
        with pytest.raises(InvalidArgument) as info:
            cu.event_elapsed_ms(bad, end)
        assert info.value.op == "cuEventElapsedTime" and info.value.code is None
    never.close()
    with pytest.raises(ClosedError):
        cu.event_elapsed_ms(start, never)
    for e in (start, end, untimed):
        e.close()
    s.close()


def test_event_reuse(dev):
    s = dev.create_stream()
    e = dev.create_event()
    for _ in range(1000):
        e.record(s)
        e.synchronize()
    assert e.query()
    e.record()  # default stream
    e.synchronize()
    e.close()
    s.close()


def test_closed_stream_and_event(dev):
    s = dev.create_stream()
    e = dev.create_event()
    s.close()
    s.close()
    for call, op in ((s.synchronize, "cuStreamSynchronize"), (s.query, "cuStreamQuery"),
                     (lambda: s.record(e), "cuEventRecord"), (lambda: s.wait(e), "cuStreamWaitEvent"),
                     (lambda: e.record(s), "cuEventRecord"), (lambda: dev.alloc(8, stream=s), "cuMemAllocAsync")):
        with pytest.raises(ClosedError) as info:
            call()
        assert info.value.op == op
    e.close()
    e.close()
    live = dev.create_stream()
    for call in (e.synchronize, e.query, lambda: e.record(live), lambda: live.wait(e), lambda: live.record(e)):
        with pytest.raises(ClosedError):
            call()
    live.close()


def test_wrong_types(dev):
    s = dev.create_stream()
    with pytest.raises(InvalidArgument):
        s.wait("not an event")
    e = dev.create_event()
    with pytest.raises(InvalidArgument):
        e.record("not a stream")
    e.close()
    s.close()


def _fill_copy_wait(dev, stream, kernels, rounds):
    """Fill a 64 KiB device buffer with i, sometimes run a short kernel, copy it into page-locked memory and wait,
    for i in 1..rounds: after each wait every byte must be there.  Returns the first wrong round, or None."""
    n = 16 << 10
    host = dev.alloc_pinned(n, "uint32")
    buf = dev.alloc(n, "uint32", stream=stream)
    spin = kernels.function("spin") if kernels is not None else None
    try:
        for i in range(1, rounds + 1):
            buf.memset(i, stream=stream)
            if spin is not None and i % 3 == 0:
                spin.launch(1, 1, 20_000, stream=stream)  # ~10 us of the GPU's time before the copy
            buf.copy_to_host(host.array, stream=stream)
            stream.synchronize()
            if host.array[0] != i or host.array[-1] != i or (i % 25 == 0 and not (host.array == i).all()):
                return i
        return None
    finally:
        buf.close()
        host.close()


def test_a_busy_streams_wait_ends_on_the_fence_word_after_every_byte(dev, kernels, monkeypatch):
    """Stream.synchronize of a busy stream queues a write of this thread's fence word behind the work and spins on
    it (native/fence.h); when it returns, the work's bytes must all be in host memory."""
    if FAKE:
        monkeypatch.setenv("FAKE_CUDA_BUSY_QUERIES", "1")  # a fake stream is never busy otherwise
    s = dev.create_stream()
    before = _core.fence_info()
    assert _fill_copy_wait(dev, s, kernels, 300) is None
    after = _core.fence_info()
    assert after["state"] == "on" and after["pages"] >= 1, after
    assert after["fenced"] - before["fenced"] >= 200, (before, after)  # nearly every wait ended on the word
    s.close()


def test_fenced_waits_of_several_threads_see_their_own_streams_work(dev, kernels, monkeypatch):
    """Each thread has its own fence word: four threads waiting at once on their own streams each see all of their
    own work, and threads that come and go hand their words on instead of taking new pages."""
    if FAKE:
        monkeypatch.setenv("FAKE_CUDA_BUSY_QUERIES", "1")
    wrong: list[object] = []

    def worker():
        s = dev.create_stream()
        try:
            wrong.append(_fill_copy_wait(dev, s, kernels, 150))
        except Exception as exc:  # reported below
            wrong.append(exc)
        finally:
            s.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == [None] * 4, wrong
    pages = _core.fence_info()["pages"]
    for _ in range(80):  # more threads than a page has words, one after another
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert wrong == [None] * 84, wrong[4:]
    assert _core.fence_info()["pages"] == pages


@pytest.mark.skipif(FAKE, reason="the fake driver has one context per device and no SM partitions")
def test_fenced_waits_on_streams_of_other_contexts(dev, kernels):
    """The fence words are registered portable in the primary context: streams of an explicit context made later
    and of a green context write them too."""
    dev.create_stream().synchronize()  # a page exists before the contexts below are made
    ctx = dev.create_context()
    green, _ = dev.split_sms(16, groups=2)
    try:
        for s in (ctx.create_stream(), green.create_stream()):
            before = _core.fence_info()["fenced"]
            assert _fill_copy_wait(dev, s, None, 60) is None
            assert _core.fence_info()["fenced"] - before >= 40
            s.close()
    finally:
        ctx.close()
        green.close()


def test_the_wait_after_a_host_function_is_the_drivers(dev, kernels, monkeypatch):
    """A fence write queued behind a host function runs only once the driver's callback thread has signalled it,
    a round trip more than cuStreamSynchronize (the main benchmark's host callback row, 35 -> 44 us): the busy
    wait after one is not fenced, the busy wait after that is again.  A kernel of ~100 us (half the spin) before
    each keeps the stream busy when the wait starts (checked by a query), and the collector is off (a collected
    buffer's free makes the next wait a real synchronize, where the pool trims)."""
    if FAKE:
        monkeypatch.setenv("FAKE_CUDA_BUSY_QUERIES", "1")
    s = dev.create_stream()
    spin = kernels.function("spin")
    buf = dev.alloc(1024, "uint32", stream=s)
    ran = []
    gc.collect()  # a buffer another test left to the collector, freed mid-test, would make the next wait a real one
    gc.disable()
    try:
        buf.memset(1, stream=s)
        s.synchronize()  # any pending pool trim is done: the next waits may be fenced
        before = _core.fence_info()["fenced"]
        spin.launch(1, 1, 200_000, stream=s)
        s.launch_host_func(lambda: ran.append(1))
        busy = not s.query()
        s.synchronize()
        assert busy and ran == [1] and _core.fence_info()["fenced"] == before, (busy, ran, _core.fence_info(), before)
        spin.launch(1, 1, 200_000, stream=s)
        buf.memset(2, stream=s)
        busy = not s.query()
        s.synchronize()
        after = _core.fence_info()
        assert busy and after["fenced"] == before + 1, (busy, after, before)
    finally:
        gc.enable()
    assert (buf.copy_to_host() == 2).all()
    buf.close()
    s.close()


def test_a_copy_after_a_free_ends_on_the_fence_and_leaves_the_trim_to_synchronize(dev, kernels, monkeypatch):
    """A stream-ordered free makes a pool trim due, which only a real synchronize does: Stream.synchronize then
    takes cuStreamSynchronize, but a synchronous copy's own wait still ends on the fence word (the trim stays due
    for the next Stream.synchronize)."""
    if FAKE:
        monkeypatch.setenv("FAKE_CUDA_BUSY_QUERIES", "1")
    s = dev.create_stream()
    spin = kernels.function("spin")
    buf = dev.alloc(1024, "uint8", stream=s)
    out = np.zeros(1024, np.uint8)
    gc.collect()
    gc.disable()  # a collected buffer's free mid-test would make a trim due where this test expects none
    try:
        buf.memset(1, stream=s)
        s.synchronize()
        dev.alloc(256, stream=s).close()  # cuMemFreeAsync: a trim is due
        before = _core.fence_info()["fenced"]
        buf.memset(3, stream=s)
        buf.copy_to_host(out)  # the bounce copy's wait, behind the fill
        assert (out == 3).all() and _core.fence_info()["fenced"] == before + 1, _core.fence_info()
        spin.launch(1, 1, 200_000, stream=s)
        busy = not s.query()
        s.synchronize()  # the due trim: cuStreamSynchronize
        assert busy and _core.fence_info()["fenced"] == before + 1, (busy, _core.fence_info(), before)
        spin.launch(1, 1, 200_000, stream=s)
        s.synchronize()  # nothing due any more: fenced again
        assert _core.fence_info()["fenced"] == before + 2, (_core.fence_info(), before)
    finally:
        gc.enable()
    buf.close()
    s.close()


_FALLBACK = """
import os
import ironaccel_cuda as cu
from ironaccel_cuda import _core
dev = cu.Device(0)
s = dev.create_stream()
n = 16 if os.environ.get("IRONACCEL_CUDA_FAKE") == "1" else 64 << 20  # 256 MiB: ~80 us of a GPU's memset
b = dev.alloc(n, "uint32", stream=s)
for i in range(1, 4):
    b.memset(i, stream=s)
    busy = not s.query()
    s.synchronize()
print(_core.fence_info()["state"], int(b.copy_to_host()[-1]), busy)
"""


def test_waits_fall_back_to_the_driver_when_there_is_no_fence():
    """With IRONACCEL_CUDA_FENCE_SPIN_US=0, or without stream memops (the fence write fails; only the fake driver
    can take them away: test_fake_driver.py runs this test so), fenced waits turn off for the process at its first
    busy wait and every wait is cuStreamSynchronize: the waits still succeed and see the work.  In a fresh process:
    the state is the process's."""
    env = dict(os.environ)
    if env.get("FAKE_CUDA_NO_STREAM_MEMOPS") != "1":
        env["IRONACCEL_CUDA_FENCE_SPIN_US"] = "0"
    if FAKE:
        env["FAKE_CUDA_BUSY_QUERIES"] = "1"  # a fake stream is never busy otherwise
    out = subprocess.run([sys.executable, "-c", _FALLBACK], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["off", "3", "True"], out.stdout
