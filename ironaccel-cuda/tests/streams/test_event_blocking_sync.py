"""Blocking-sync events (CU_EVENT_BLOCKING_SYNC): `synchronize()` sleeps on the driver instead of spinning a core."""

from __future__ import annotations

import ctypes
import time

import pytest
from helpers import FAKE

import ironaccel_cuda as cu
from ironaccel import InvalidArgument

pytestmark = pytest.mark.backend("cuda")

SPIN_CYCLES = 600_000_000  # ~0.3 s on a ~2 GHz SM clock: long enough to tell sleeping from spinning


def _driver_flags(event: cu.Event) -> int:
    """The flags the fake driver was given for `event` (tests/fakecuda/fake_cuda.c)."""
    lib = ctypes.CDLL("libcuda.so.1")
    lib.fake_cuda_event_flags.restype = ctypes.c_longlong
    lib.fake_cuda_event_flags.argtypes = [ctypes.c_void_p]
    return int(lib.fake_cuda_event_flags(ctypes.c_void_p(event.handle)))


def test_blocking_sync_event_flags_and_repr(dev):
    plain, blocking = dev.create_event(), dev.create_event(blocking_sync=True)
    timed = dev.create_event(timing=True, blocking_sync=True)
    assert (plain.blocking_sync, blocking.blocking_sync, timed.blocking_sync) == (False, True, True)
    assert (blocking.timing, timed.timing) == (False, True)
    assert "blocking_sync=True" in repr(blocking) and "blocking_sync" not in repr(plain)
    if FAKE:  # what reached cuEventCreate: BLOCKING_SYNC = 0x1, DISABLE_TIMING = 0x2
        assert (_driver_flags(plain), _driver_flags(blocking), _driver_flags(timed)) == (0x2, 0x3, 0x1)
    s = dev.create_stream()
    for e in (blocking, timed):
        assert s.record(e) is e
        e.synchronize()
        assert e.query() is True
    for x in (plain, blocking, timed, s):
        x.close()
    with pytest.raises(InvalidArgument, match="cuEventCreate: blocking_sync must be a bool"):
        dev.create_event(blocking_sync=1)


def test_blocking_sync_event_times_and_orders_streams(dev, kernels):
    start, end = dev.create_event(timing=True, blocking_sync=True), dev.create_event(timing=True, blocking_sync=True)
    producer, consumer = dev.create_stream(), dev.create_stream()
    start.record(producer)
    kernels.function("spin").launch(1, 1, SPIN_CYCLES // 30, stream=producer)
    end.record(producer)
    consumer.wait(end)
    consumer.synchronize()
    assert end.query() is True
    assert end.elapsed_ms(start) >= 0.0
    for x in (start, end, producer, consumer):
        x.close()


@pytest.mark.skipif(FAKE, reason="the fake driver's events complete at once: there is nothing to wait for")
def test_blocking_sync_wait_leaves_the_core_idle(dev, kernels):
    """While a ~0.3 s kernel runs, the thread in a blocking-sync event's synchronize() uses a small part of
    that time on its core; the same wait on a default event spins (or yields) for most of it."""
    s = dev.create_stream()
    spin = kernels.function("spin")

    def wait(event: cu.Event) -> tuple[float, float]:
        spin.launch(1, 1, SPIN_CYCLES, stream=s)
        s.record(event)
        wall, cpu = time.perf_counter(), time.thread_time()
        event.synchronize()
        return time.perf_counter() - wall, time.thread_time() - cpu

    blocking = dev.create_event(blocking_sync=True)
    wall, cpu = wait(blocking)
    assert wall > 0.05, f"the kernel ended too soon to measure ({wall * 1e3:.1f} ms)"
    assert cpu < 0.25 * wall, f"blocking-sync wait used {cpu * 1e3:.1f} ms of CPU in {wall * 1e3:.1f} ms"
    assert blocking.query() is True
    blocking.close()
    s.close()
