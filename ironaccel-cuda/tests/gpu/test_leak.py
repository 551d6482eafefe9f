"""Device memory before and after a workload that touches every allocation path."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import ironaccel_cuda as cu
from ironaccel_cuda import _dlpack

pytestmark = pytest.mark.backend("cuda")


def workload(dev, kernels):
    s = dev.create_stream()
    pool = dev.create_pool(s)
    x = np.arange(1 << 16, dtype=np.float32)
    for _ in range(20):
        a = dev.alloc(x.size, "float32", stream=s)
        b = pool.alloc(x.size, "float32")
        a.copy_from(x, stream=s)
        b.copy_from(a, stream=s)
        view = b[100:200]
        kernels.function("saxpy").launch(256, 256, 1.0, a, b, x.size, stream=s)
        capsule = b.__dlpack__(stream=-1)
        del capsule
        _ = view.copy_to_host(stream=s)
        s.synchronize()
        a.close()
        b.close()
    leaked = [dev.alloc(1 << 20) for _ in range(5)]  # dropped without close: GC frees them
    del leaked
    t = threading.Thread(target=lambda: [pool.alloc(4096).close() for _ in range(100)])
    t.start()
    t.join()
    graph_stream = dev.create_stream()
    c = dev.alloc(1024, "float32", stream=graph_stream)
    graph_stream.begin_capture()
    c.memset(0, stream=graph_stream)
    exe = graph_stream.end_capture().instantiate()
    exe.launch(graph_stream)
    graph_stream.synchronize()
    exe.close()
    c.close()
    graph_stream.close()
    pinned = dev.alloc_pinned(1 << 20)
    pinned.close()
    with cu.pinned(x, dev):
        pass
    pool.close()
    s.close()


def test_no_device_memory_leak(dev, kernels):
    workload(dev, kernels)  # warm-up: module loads, first-use allocations
    gc.collect()
    dev.synchronize()
    used_before = dev.pool_usage()[0]
    free_before = dev.memory_info()[0]
    exports_before = _dlpack.live_exports()
    for _ in range(3):
        workload(dev, kernels)
    gc.collect()
    dev.synchronize()
    assert dev.pool_usage()[0] == used_before
    assert _dlpack.live_exports() == exports_before
    assert abs(dev.memory_info()[0] - free_before) <= 64 << 20
