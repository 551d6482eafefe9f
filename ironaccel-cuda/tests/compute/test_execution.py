"""The execution model on the CUDA ComputeDevice: what only a GPU's clock can check.

The conformance kit's execution tests (`ExecutionConformance`) run in
compute/test_conformance.py on the GPU and against the fake driver; here the
batch timestamps are compared with CUDA's own timing events on the same kernel.
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from helpers import FAKE
from helpers.kernels import SOURCE

pytestmark = pytest.mark.backend("cuda")

#: A busy-wait of `kcycles` thousand clocks: 5000 is about 2.5 ms on an H200 (1.98 GHz), long beside a launch's
#: few microseconds.  (kernels.py's spin takes a long long, which the ComputeDevice's 32-bit params do not.)
SPIN = r"""
extern "C" __global__ void spin_k(unsigned kcycles) {
    long long end = clock64() + 1000LL * kcycles;
    while (clock64() < end) {}
}
"""
RUNS = 7


def _kernel(dev):
    """(pipeline, buffers, params): the busy-wait on a GPU; on the fake driver (whose kernels take no time and
    are found by name) scale_offset, which still runs every call the comparison makes."""
    if FAKE:
        x, y = dev.upload(np.ones(64, np.float32)), dev.alloc(64, "float32")
        return dev.pipeline(SOURCE, "scale_offset", buffers=2, params=3), [x, y], (2.0, 1.0, 64)
    return dev.pipeline(SPIN, "spin_k", buffers=0, params=1, workgroup_size=1), [], (np.uint32(5000),)


def _event_ns(dev, kernel) -> float:
    pipeline, buffers, params = kernel
    start, end = dev.create_event(timing=True), dev.create_event(timing=True)
    stream = dev.default_stream
    stream.record(start)
    dev.dispatch(pipeline, buffers, 1, params)
    stream.record(end)
    end.synchronize()
    ns = end.elapsed_ms(start) * 1e6
    start.close()
    end.close()
    return ns


def test_timestamps_agree_with_cuda_events(dev):
    kernel = _kernel(dev)
    batch = dev.batch(timestamps=True)
    batch.dispatch(kernel[0], kernel[1], 1, kernel[2])
    _event_ns(dev, kernel)  # warm-up: module load, first launch
    dev.submit(batch).timings(timeout=60)
    stamped, evented = [], []
    for _ in range(RUNS):  # interleaved, so clock changes hit both alike
        stamped.append(dev.submit(batch).timings(timeout=60).commands_ns[0])
        evented.append(_event_ns(dev, kernel))
    a, b = statistics.median(stamped), statistics.median(evented)
    assert a >= 0 and b >= 0
    if not FAKE:  # the fake driver's kernels take no time
        assert b > 1e5, f"spin ran {b:.0f} ns: too short to compare"
        assert abs(a - b) <= 0.1 * b, f"batch timestamps {a:.0f} ns vs CUDA events {b:.0f} ns"
    batch.close()


def test_queues_have_cuda_priorities(dev):
    least, greatest = dev.stream_priority_range
    urgent = dev.create_queue(priority=100)  # clamped to the device's most urgent
    assert urgent.priority == -greatest
    relaxed = dev.create_queue(priority=-100)
    assert relaxed.priority == -least
    assert dev.max_queues == 8
    urgent.close()
    relaxed.close()
