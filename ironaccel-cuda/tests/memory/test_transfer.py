"""Synchronous host <-> device copies on every path: bounce buffer, direct, staged pipeline; pageable and pinned.

Each size is checked against an independent path: data written through the
pageable path is read back through page-locked memory (a direct DMA) and the
other way round, with destinations poisoned first, so a path that drops,
repeats or reorders chunks cannot hide behind its own inverse.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

pytestmark = pytest.mark.backend("cuda")

rng = np.random.default_rng(44)
# bounce (<= 64 KiB), direct (64 KiB - 256 KiB), pipeline (>= 256 KiB), with sizes off every boundary
SIZES = [1, 255, 4096, 65535, 65536, 65537, 200_003, 262_144, 262_145, 1_000_003, 4 << 20, (16 << 20) + 12_345]


def _pinned_copy(dev, data: np.ndarray):
    p = dev.alloc_pinned(data.size, "uint8")
    p.array[:] = data
    return p


@pytest.mark.parametrize("nbytes", SIZES)
def test_pageable_to_device_checked_through_pinned(dev, nbytes):
    data = rng.integers(0, 256, nbytes, dtype=np.uint8)
    buf = dev.alloc(nbytes)
    buf.memset(0xA5)
    buf.copy_from(data)  # pageable: bounce, direct or pipeline
    back = dev.alloc_pinned(nbytes, "uint8")
    back.array[:] = 0x5A
    buf.copy_to_host(back.array)  # page-locked: a plain DMA
    assert np.array_equal(back.array, data)
    back.close()
    buf.close()


@pytest.mark.parametrize("nbytes", SIZES)
def test_device_to_pageable_checked_through_pinned(dev, nbytes):
    data = rng.integers(0, 256, nbytes, dtype=np.uint8)
    src = _pinned_copy(dev, data)
    buf = dev.alloc(nbytes)
    buf.copy_from(src.array)  # page-locked: a plain DMA
    out = np.full(nbytes, 0x5A, np.uint8)
    assert buf.copy_to_host(out) is out  # pageable: bounce, direct or pipeline
    assert np.array_equal(out, data)
    fresh = buf.copy_to_host()  # into a new (untouched) array
    assert np.array_equal(fresh, data)
    src.close()
    buf.close()


def test_typed_and_multidimensional_arrays(dev):
    data = rng.standard_normal((3, 700_001)).astype(np.float64)  # 16.8 MB, not a multiple of any chunk
    buf = dev.alloc(data.size, "float64")
    buf.copy_from(data)
    out = np.full((3, 700_001), np.nan)
    buf.copy_to_host(out)
    assert np.array_equal(out, data)
    view = buf[1000:400_000]
    part = view.copy_to_host()
    assert np.array_equal(part, data.reshape(-1)[1000:400_000])
    view.copy_from(np.zeros(399_000))
    assert not buf.copy_to_host().reshape(3, -1)[0, 1000:400_000].any()
    buf.close()


def test_copies_on_the_buffer_stream_are_ordered(dev):
    s = dev.create_stream()
    n = 3 << 20
    a, b = dev.alloc(n, stream=s), dev.alloc(n, stream=s)
    data = rng.integers(0, 256, n, dtype=np.uint8)
    a.copy_from(data)
    b.copy_from(a, stream=s)  # queued on s after the synchronous copy into a
    out = np.zeros(n, np.uint8)
    b.copy_to_host(out)  # synchronous on b's home stream s: sees the device-to-device copy
    assert np.array_equal(out, data)
    a.close()
    b.close()
    s.close()


def test_concurrent_large_and_small_copies(dev):
    errors: list = []

    def worker(k: int) -> None:
        try:
            s = dev.create_stream()
            local = np.random.default_rng(k)
            for i in range(6):
                n = [3 << 20, 1000, 70_000, (1 << 20) + 7][(k + i) % 4]
                data = local.integers(0, 256, n, dtype=np.uint8)
                buf = dev.alloc(n, stream=s)
                buf.copy_from(data)
                out = np.full(n, 7, np.uint8)
                buf.copy_to_host(out)
                assert np.array_equal(out, data), (k, i, n)
                buf.close()
            s.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import ironaccel_cuda as cu
    from ironaccel_cuda import transfer
    dev = cu.Device(0)
    rng = np.random.default_rng(5)
    ok = []
    for n in (1, 4095, 65535, 65536, 65537, 300_001, 1 << 20, (3 << 20) + 1):
        data = rng.integers(0, 256, n, dtype=np.uint8)
        buf = dev.alloc(n)
        buf.copy_from(data)
        out = np.full(n, 3, np.uint8)
        buf.copy_to_host(out)
        ok.append(bool(np.array_equal(out, data)))
        buf.close()
    print(json.dumps({"ok": ok, "settings": transfer.settings()}))
    """
)


def _release_parent_caches() -> tuple[int, int]:
    """Give back what this process's earlier tests cached, so the child can make its context; (free, total)."""
    import gc

    import ironaccel_cuda as cu

    gc.collect()
    if "torch" in sys.modules:
        sys.modules["torch"].cuda.empty_cache()
    if "cupy" in sys.modules:
        sys.modules["cupy"].get_default_memory_pool().free_all_blocks()
    dev = cu.Device(0)
    dev.synchronize()
    return dev.memory_info()


def test_many_chunks_through_few_slots():
    """Small chunks, two slots, three threads: every chunk recycles a slot whose DMA must have finished."""
    env = dict(os.environ, IRONACCEL_CUDA_COPY_CHUNK="65536", IRONACCEL_CUDA_COPY_SLOTS="2",
               IRONACCEL_CUDA_COPY_THREADS="3", IRONACCEL_CUDA_PIPELINE_MIN="4096", IRONACCEL_CUDA_BOUNCE_MAX="1024")
    free, total = _release_parent_caches()
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, f"parent: {free >> 20} of {total >> 20} MiB free; child: " + out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["settings"]["chunk"] == 65536 and result["settings"]["slots"] == 2
    assert all(result["ok"]), result


def test_each_copy_path_is_taken(dev):
    """Small copies use the bounce buffer, middle ones the driver, large ones the pipeline."""
    from ironaccel_cuda import _core

    before = _core.staging_info()
    small, large = max(1, before["bounce_max"] // 2), max(4 * before["pipeline_min"], 2 << 20)
    middle = (before["bounce_max"] + before["pipeline_min"]) // 2
    for n in (small, middle, large):
        data = rng.integers(0, 256, n, dtype=np.uint8)
        buf = dev.alloc(n)
        buf.copy_from(data)
        out = np.zeros(n, np.uint8)
        buf.copy_to_host(out)
        assert np.array_equal(out, data)
        buf.close()
    after = _core.staging_info()
    taken = {k: after[k] - before[k] for k in ("pipeline", "bounce", "direct")}
    assert taken == {"pipeline": 2, "bounce": 2, "direct": 2}, taken


def test_small_copies_wait_on_the_fence_word(dev):
    """A small copy's wait ends on the fence word a stream memop writes after it, and sees every byte of the
    work queued before it: a fill, then a read of 1 KiB, 300 times with a different byte each time."""
    from ironaccel_cuda import _core

    s = dev.create_stream()
    buf = dev.alloc(1024, stream=s)
    out = np.zeros(1024, np.uint8)
    s.synchronize()  # any pool trim due is done: the waits below may be fenced
    before, fences = _core.staging_info(), _core.fence_info()
    for i in range(300):
        buf.memset(i % 251, stream=s)  # queued on s, the buffer's home stream
        buf.copy_to_host(out)  # synchronous on the home stream: behind the fill
        assert (out == i % 251).all(), i
    after, fences_after = _core.staging_info(), _core.fence_info()
    assert after["bounce"] - before["bounce"] == 300
    # Nearly every wait ends on the fence word (one may take longer than the spin on a busy machine).
    assert fences_after["fenced"] - fences["fenced"] >= 250, (fences, fences_after)
    buf.close()
    s.close()


def test_a_small_copy_behind_long_work_waits_for_it(dev, kernels):
    """Queued behind a kernel that runs far longer than the fence spin, a small copy falls back to
    cuStreamSynchronize and still returns the kernel's result, not what was there before."""
    from ironaccel_cuda import _core

    s = dev.create_stream()
    n = 256
    x = dev.alloc(n, "float32", stream=s)
    y = dev.alloc(n, "float32", stream=s)
    x.copy_from(np.ones(n, np.float32))
    y.copy_from(np.ones(n, np.float32))
    before = _core.staging_info()
    kernels.function("spin").launch(1, 1, 50_000_000, stream=s)  # ~25 ms at 2 GHz
    kernels.function("saxpy").launch(1, n, 2.0, x, y, n, stream=s)
    out = y.copy_to_host(np.zeros(n, np.float32))  # synchronous on y's home stream s
    assert (out == 3.0).all()
    after = _core.staging_info()
    assert after["bounce"] - before["bounce"] == 1
    x.close()
    y.close()
    s.close()


def test_page_locked_memory_is_copied_directly(dev):
    """Memory page-locked by ironaccel or by another library never goes through the staging pipeline."""
    import ctypes

    from cuda.bindings import driver

    from ironaccel_cuda import _core

    n = max(2 << 20, 4 * _core.staging_info()["pipeline_min"])
    data = rng.integers(0, 256, n, dtype=np.uint8)
    buf = dev.alloc(n)
    ours = dev.alloc_pinned(n, "uint8")
    dev.bind()
    err, ptr = driver.cuMemHostAlloc(n, 0)  # as CuPy or PyTorch would
    assert not err
    theirs = np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(int(ptr)))
    before = _core.staging_info()
    for host in (ours.array, theirs):
        host[:] = data
        buf.copy_from(host)
        host[:] = 0
        buf.copy_to_host(host)
        assert np.array_equal(host, data)
    after = _core.staging_info()
    assert after["pipeline"] == before["pipeline"] and after["direct"] - before["direct"] == 4
    driver.cuMemFreeHost(ptr)
    ours.close()
    buf.close()


def test_copies_from_a_thread_without_a_current_context(dev):
    """A fresh thread has no current context; every copy path must still work there (and say why if not)."""
    sizes = (1000, 100_000, 3 << 20)
    bufs = [dev.alloc(n) for n in sizes]
    results: list = []

    def work() -> None:
        try:
            for buf, n in zip(bufs, sizes):
                data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
                buf.copy_from(data)
                out = np.zeros(n, np.uint8)
                buf.copy_to_host(out)
                results.append(bool(np.array_equal(out, data)))
        except BaseException as exc:
            results.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert results == [True, True, True], results
    for buf in bufs:
        buf.close()
