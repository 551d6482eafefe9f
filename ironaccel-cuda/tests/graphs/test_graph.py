"""Graphs: capture, instantiate, launch, update from a re-capture; misuse."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FAKE

from ironaccel import ClosedError, DriverError, InvalidArgument, InvalidState

pytestmark = pytest.mark.backend("cuda")


def capture(dev, s, fn, a, dx, dy, n, repeat=1):
    assert s.capture_status == "none"
    s.begin_capture()
    assert s.is_capturing and s.capture_status == "active"
    dy.memset(0, stream=s)
    for _ in range(repeat):
        fn.launch((n + 255) // 256, 256, a, dx, dy, n, stream=s)
    graph = s.end_capture()
    assert not s.is_capturing
    return graph


def test_capture_instantiate_launch_update(dev, kernels):
    s = dev.create_stream()
    fn = kernels.function("saxpy")
    n = 10_000
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    dx, dy = dev.alloc(n, "float32", stream=s), dev.alloc(n, "float32", stream=s)
    dx.copy_from(x, stream=s)
    s.synchronize()
    graph = capture(dev, s, fn, 2.0, dx, dy, n, repeat=3)
    assert graph.node_count == 4
    exe = graph.instantiate()
    dy.memset(0xFF, stream=s)  # nothing ran during capture: the graph does it
    exe.launch(s)
    s.synchronize()
    np.testing.assert_allclose(dy.copy_to_host(), 6 * x, rtol=1e-5, atol=1e-6)
    exe.launch(s)  # replay: memset then three saxpys again
    s.synchronize()
    np.testing.assert_allclose(dy.copy_to_host(), 6 * x, rtol=1e-5, atol=1e-6)

    graph2 = capture(dev, s, fn, -1.0, dx, dy, n, repeat=3)
    exe.update(graph2)
    exe.launch()  # default stream
    dev.default_stream.synchronize()
    np.testing.assert_allclose(dy.copy_to_host(), -3 * x, rtol=1e-5, atol=1e-6)

    different = capture(dev, s, fn, 1.0, dx, dy, n, repeat=1)  # other topology
    with pytest.raises(DriverError) as info:
        exe.update(different)
    assert info.value.op == "cuGraphExecUpdate"
    for g in (graph, graph2, different):
        g.close()
        g.close()
    exe.launch(s)  # an instantiated graph outlives its source graph
    s.synchronize()
    exe.close()
    exe.close()
    with pytest.raises(ClosedError):
        exe.launch(s)
    with pytest.raises(ClosedError):
        graph.instantiate()
    dx.close()
    dy.close()
    s.close()


def test_sync_during_capture_is_an_error(dev, kernels):
    s = dev.create_stream()
    buf = dev.alloc(256, "float32", stream=s)
    s.begin_capture()
    buf.memset(0, stream=s)
    with pytest.raises(InvalidState) as info:
        s.synchronize()
    assert info.value.op == "cuStreamSynchronize"
    assert info.value.code_name == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
    assert s.capture_status == ("active" if FAKE else "invalidated")  # a failed capture is still to be ended
    assert s.is_capturing is FAKE
    try:
        s.end_capture().close()  # the fake driver keeps the capture going
    except InvalidState as exc:  # a real driver invalidates the capture
        assert exc.op == "cuStreamEndCapture" and exc.code_name == "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"
    assert not s.is_capturing and s.capture_status == "none"
    s.synchronize()
    buf.close()
    s.close()
    with pytest.raises(ClosedError):
        s.capture_status  # noqa: B018


def test_capture_misuse(dev):
    s = dev.create_stream()
    with pytest.raises(InvalidArgument):
        s.begin_capture(mode="sometimes")
    with pytest.raises(DriverError):
        s.end_capture()  # not capturing
    with pytest.raises(InvalidArgument):
        graph_like = object()
        exe = None
        s.begin_capture()
        g = s.end_capture()
        exe = g.instantiate()
        exe.update(graph_like)
    exe.close()
    g.close()
    s.close()
    with pytest.raises(ClosedError):
        s.begin_capture()


def test_graph_replay_of_many_small_launches(dev, kernels):
    s = dev.create_stream()
    fn = kernels.function("saxpy")
    n = 256
    dx, dy = dev.alloc(n, "float32", stream=s), dev.alloc(n, "float32", stream=s)
    dx.copy_from(np.ones(n, np.float32), stream=s)
    s.synchronize()
    s.begin_capture()
    dy.memset(0, stream=s)
    for _ in range(100):
        fn.launch(1, 256, 1.0, dx, dy, n, stream=s)
    exe = s.end_capture().instantiate()
    for _ in range(3):
        exe.launch(s)
    s.synchronize()
    np.testing.assert_array_equal(dy.copy_to_host(), np.full(n, 100, np.float32))
    exe.close()
    dx.close()
    dy.close()
    s.close()
