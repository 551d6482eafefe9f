"""Host functions on streams (order, failures, lifetime, capture), the implicit streams, the priority range."""

from __future__ import annotations

import gc
import sys
import threading
import weakref

import numpy as np
import pytest
from helpers import FAKE

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")


def test_host_funcs_run_in_stream_order(dev, kernels):
    s = dev.create_stream()
    n = 4096
    fn = kernels.function("saxpy")
    x = np.arange(n, dtype=np.float32)
    dx, dy = dev.alloc(n, "float32", stream=s), dev.alloc(n, "float32", stream=s)
    pinned = dev.alloc_pinned(n, "float32")
    seen: list[tuple[str, float]] = []
    dx.copy_from(x, stream=s)
    dy.memset(0, stream=s)
    fn.launch((n + 255) // 256, 256, 2.0, dx, dy, n, stream=s)
    dy.copy_to_host(out=pinned.array, stream=s)
    s.launch_host_func(lambda: seen.append(("after the copy", float(pinned.array[7]))))
    fn.launch((n + 255) // 256, 256, 1.0, dx, dy, n, stream=s)
    s.launch_host_func(lambda: seen.append(("second", 0.0)))
    s.synchronize()
    assert seen == [("after the copy", 14.0), ("second", 0.0)]  # the callback saw the copy's result
    np.testing.assert_allclose(dy.copy_to_host(), 3 * x)
    for b in (dx, dy, pinned):
        b.close()
    s.close()


@pytest.mark.skipif(FAKE, reason="the fake driver runs host functions at once, on the calling thread")
def test_later_work_waits_for_a_host_func(dev):
    s = dev.create_stream()
    release = threading.Event()
    ran = threading.Event()
    s.launch_host_func(lambda: (release.wait(10), ran.set()))
    e = s.record()
    assert not e.query()  # the event behind the host function is not reached while it blocks
    release.set()
    s.synchronize()
    assert ran.is_set() and e.query()
    s.close()


def test_a_raising_host_func_is_reported_never_lost(dev, monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: reported.append(info.exc_value))
    s = dev.create_stream()

    def boom() -> None:
        raise ValueError("inside the callback")

    s.launch_host_func(boom)
    s.launch_host_func(lambda: None)
    with pytest.raises(cu.HostFuncError) as info:
        s.synchronize()
    assert info.value.op == "cuLaunchHostFunc" and isinstance(info.value.__cause__, ValueError)
    assert "inside the callback" in str(info.value)
    assert len(reported) == 1 and isinstance(reported[0], ValueError)
    s.synchronize()  # reported once
    s.launch_host_func(boom)
    s.launch_host_func(boom)
    with pytest.raises(cu.HostFuncError) as info:
        while not s.query():
            pass
    assert len(info.value.others) == 1
    assert s.query()
    s.close()


@pytest.mark.skipif(FAKE, reason="the fake driver runs host functions at once, on the calling thread")
def test_host_func_is_kept_alive_until_it_ran(dev):
    s = dev.create_stream()
    release = threading.Event()
    calls = []

    class Callback:
        def __call__(self) -> None:
            calls.append(1)

    s.launch_host_func(lambda: release.wait(10))
    cb = Callback()
    ref = weakref.ref(cb)
    s.launch_host_func(cb)
    del cb
    gc.collect()
    assert ref() is not None  # queued, not run yet: still alive
    release.set()
    s.synchronize()
    gc.collect()
    assert calls == [1] and ref() is None  # ran once, then let go
    s.close()


def test_host_func_bad_input(dev):
    s = dev.create_stream()
    for bad in (None, 5, "f"):
        with pytest.raises(InvalidArgument):
            s.launch_host_func(bad)
    s.close()
    with pytest.raises(ClosedError):
        s.launch_host_func(lambda: None)


@pytest.mark.skipif(FAKE, reason="the fake driver does not capture host functions into graphs")
def test_host_func_inside_graph_capture(dev, kernels):
    s = dev.create_stream()
    calls = []
    n = 256
    buf = dev.alloc(n, "float32", stream=s)
    s.synchronize()
    s.begin_capture()
    buf.memset(0, stream=s)
    s.launch_host_func(lambda: calls.append("replay"))
    graph = s.end_capture()
    assert graph.node_count == 2 and not calls  # nothing ran during capture
    exe = graph.instantiate()
    graph.close()  # the executable graph keeps the callable
    gc.collect()
    for _ in range(3):
        exe.launch(s)
    s.synchronize()
    assert calls == ["replay"] * 3

    def boom() -> None:
        raise RuntimeError("in a graph")

    s.begin_capture()
    s.launch_host_func(boom)
    exe2 = s.end_capture().instantiate()
    exe2.launch(s)
    with pytest.raises(cu.HostFuncError):
        s.synchronize()
    exe.close()
    exe2.close()
    buf.close()
    s.close()


def test_legacy_and_per_thread_streams(dev, kernels):
    legacy, per_thread = dev.legacy_stream, dev.per_thread_stream
    assert legacy is dev.legacy_stream and legacy.handle == 1 and per_thread.handle == 2
    assert legacy.__cuda_stream__() == (0, 1)
    n = 1024
    fn = kernels.function("saxpy")
    x = np.ones(n, np.float32)
    for s in (legacy, per_thread):
        dx, dy = dev.alloc(n, "float32", stream=s), dev.alloc(n, "float32", stream=s)
        dx.copy_from(x, stream=s)
        dy.memset(0, stream=s)
        fn.launch(4, 256, 5.0, dx, dy, n, stream=s)
        seen = []
        s.launch_host_func(lambda seen=seen: seen.append(True))
        e = s.record()
        s.synchronize()
        assert e.query() and s.query() and seen == [True]
        np.testing.assert_array_equal(dy.copy_to_host(), np.full(n, 5, np.float32))
        dx.close()
        dy.close()
        s.close()  # never destroyed
        assert s.query()
    # from another thread, where no context is current yet: the stream binds its device first
    out = []
    thread = threading.Thread(target=lambda: (legacy.synchronize(), out.append(legacy.query())))
    thread.start()
    thread.join()
    assert out == [True]


def test_priority_range(dev):
    least, greatest = dev.stream_priority_range
    assert greatest <= least and least == 0
    s = dev.create_stream(priority=greatest)
    assert s.priority == greatest and s.priority_range == (least, greatest)
    s.close()
