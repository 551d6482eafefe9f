"""Batched copies (`cu.copy_batch`, cuMemcpyBatchAsync): every direction in one call, addresses as arrays,
attributes in runs, and bad input refused before the driver sees it."""

from __future__ import annotations

import numpy as np
import pytest

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument, InvalidState

pytestmark = pytest.mark.backend("cuda")


def _filled(dev, n, seed):
    buf = dev.alloc(n, "uint8")
    buf.copy_from(np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8))
    return buf


def test_device_and_pinned_copies_in_one_batch(dev):
    s = dev.create_stream()
    sizes = [1, 4096, 65536 + 3, 1 << 20]
    srcs = [_filled(dev, n, i) for i, n in enumerate(sizes)]
    dsts = [dev.alloc(n, "uint8") for n in sizes]
    host = [dev.alloc_pinned(n, "uint8") for n in sizes]
    dev.synchronize()
    cu.copy_batch(dsts, srcs, stream=s)                       # device -> device
    cu.copy_batch(host, dsts, stream=s)                       # device -> page-locked host, ordered after
    s.synchronize()
    for src, h in zip(srcs, host):
        np.testing.assert_array_equal(h.array, src.copy_to_host())
    for h in host:
        h.array[:] = 7
    cu.copy_batch(dsts, host, stream=s)                       # host -> device
    s.synchronize()
    for d in dsts:
        assert (d.copy_to_host() == 7).all()


def test_addresses_as_arrays_with_sizes_and_partial_copies(dev):
    s = dev.create_stream()
    src = _filled(dev, 1 << 16, 3)
    dst = dev.alloc(1 << 16, "uint8")
    dst.copy_from(np.zeros(1 << 16, np.uint8))
    dev.synchronize()
    # Scatter 16 blocks of 1 KiB in reverse order: the shape of a KV-cache block swap.
    block = 1024
    starts = np.arange(16, dtype=np.uint64) * block
    cu.copy_batch(dst.ptr + starts[::-1], src.ptr + starts, block, stream=s)
    s.synchronize()
    want = src.copy_to_host()[: 16 * block].reshape(16, block)[::-1].ravel()
    got = dst.copy_to_host()
    np.testing.assert_array_equal(got[: 16 * block], want)
    assert (got[16 * block:] == 0).all()
    # Buffers with sizes smaller than the buffers copy a prefix only.
    small = dev.alloc(4096, "uint8")
    small.copy_from(np.zeros(4096, np.uint8))
    cu.copy_batch([small], [src], [100], stream=s)
    s.synchronize()
    out = small.copy_to_host()
    np.testing.assert_array_equal(out[:100], src.copy_to_host()[:100])
    assert (out[100:] == 0).all()


def test_attributes_per_copy_and_the_per_thread_stream(dev):
    srcs = [_filled(dev, 4096, i) for i in range(4)]
    dsts = [dev.alloc(4096, "uint8") for _ in range(4)]
    dev.synchronize()
    attrs = [cu.CopyAttributes(), cu.CopyAttributes(),
             cu.CopyAttributes(src_access="any", prefer_overlap=True), cu.CopyAttributes(src_access="during_call")]
    s = dev.per_thread_stream
    cu.copy_batch(dsts, srcs, stream=s, attributes=attrs)
    s.synchronize()
    for d, src in zip(dsts, srcs):
        np.testing.assert_array_equal(d.copy_to_host(), src.copy_to_host())
    host = dev.alloc_pinned(4096, "uint8")
    host.array[:] = 9
    cu.copy_batch([dsts[0]], [host], stream=dev.default_stream,
                  attributes=cu.CopyAttributes(src_access="during_call", src_hint="host", dst_hint=dev))
    host.array[:] = 1  # "during_call": the source was read before copy_batch returned
    dev.default_stream.synchronize()
    assert (dsts[0].copy_to_host() == 9).all()


def test_an_empty_batch_does_nothing(dev):
    cu.copy_batch([], [], stream=dev.create_stream())
    cu.copy_batch(np.empty(0, np.uint64), np.empty(0, np.uint64), 0, stream=dev.create_stream())


def test_bad_input_is_refused_before_the_driver(dev):
    s = dev.create_stream()
    a, b = dev.alloc(64, "uint8"), dev.alloc(128, "uint8")
    cases = [
        (([a], [b]), {}, "the destination has 64 bytes and the source 128"),
        (([a], [a, b]), {}, "must pair up"),
        (([a.ptr], [b.ptr]), {}, "sizes is needed"),
        (([a], [b], [65]), {}, "more than the destination's 64"),
        (([a], [b], [-1]), {}, "must not be negative"),
        (([a], [b], [1, 2]), {}, "must be an int or 1 integers"),
        ((a, b), {}, "must be a sequence"),
        (([a], ["x"]), {}, "srcs[0] must be an open ironaccel buffer"),
        (([0], [b.ptr], 1), {}, "dsts[0] is not an address"),
        ((np.zeros((1, 1), np.uint64), [b.ptr], 1), {}, "1-D of integer addresses"),
        (([a], [b], 64), {"attributes": [cu.CopyAttributes()] * 2}, "2 entries for 1 copies"),
        (([a], [b], 64), {"attributes": ["stream"]}, "must be a CopyAttributes"),
    ]
    for args, kw, text in cases:
        with pytest.raises(InvalidArgument, match="cuMemcpyBatchAsync") as err:
            cu.copy_batch(*args, stream=s, **kw)
        assert text in str(err.value), (args, str(err.value))
    with pytest.raises(InvalidArgument, match="legacy default stream"):
        cu.copy_batch([a], [b], 64, stream=dev.legacy_stream)
    with pytest.raises(InvalidArgument, match="must be an ironaccel Stream"):
        cu.copy_batch([a], [b], 64, stream=None)
    with pytest.raises(InvalidArgument, match="src_access"):
        cu.CopyAttributes(src_access="later")
    with pytest.raises(InvalidArgument, match="dst_hint"):
        cu.CopyAttributes(dst_hint="gpu")
    closed = dev.create_stream()
    closed.close()
    with pytest.raises(ClosedError):
        cu.copy_batch([a], [b], 64, stream=closed)


def test_a_capturing_stream_is_refused_and_its_capture_survives(dev):
    s = dev.create_stream()
    a, b = dev.alloc(64, "uint8"), dev.alloc(64, "uint8")
    s.begin_capture()
    with pytest.raises(InvalidState, match="no graph node"):
        cu.copy_batch([a], [b], stream=s)
    a.memset(5, stream=s)  # the capture is still valid: it records the memset
    graph = s.end_capture()
    graph.instantiate().launch(s)
    s.synchronize()
    assert (a.copy_to_host() == 5).all()


def test_a_driver_failure_names_the_call(dev):
    s = dev.create_stream()
    a = dev.alloc(64, "uint8")
    # A range running past the end of a device allocation: the driver refuses the batch.
    with pytest.raises(cu.errors.DriverError, match="cuMemcpyBatchAsync") as err:
        cu.copy_batch([a.ptr + 32], [a.ptr], 64, stream=s)
    assert err.value.code is not None
