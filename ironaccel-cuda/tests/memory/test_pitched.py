"""Pitched memory and 2-D / 3-D copies between host arrays, pitched and packed device memory, sync and async."""

from __future__ import annotations

import numpy as np
import pytest

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")


def test_2d_round_trip_with_padded_rows(dev):
    img = dev.alloc_pitched((480, 641), "uint8")
    assert img.shape == (480, 641) and img.pitch >= 641 and img.nbytes == img.pitch * 480
    assert img.buffer.nbytes == img.nbytes and img.buffer.dtype.value == "uint8"
    frame = np.random.default_rng(1).integers(0, 256, (480, 641), dtype=np.uint8)
    img.copy_from(frame)
    np.testing.assert_array_equal(img.copy_to_host(), frame)
    # the padding is really there: row r starts r * pitch bytes in
    raw = img.buffer.copy_to_host()
    np.testing.assert_array_equal(raw[img.pitch * 7: img.pitch * 7 + 641], frame[7])
    img.close()
    assert img.closed


def test_strided_host_rows_and_async_copies(dev):
    big = np.arange(200 * 300, dtype=np.float32).reshape(200, 300)
    tile = big[10:110:2, 20:120]  # every other row of a sub-rectangle: strided rows
    pb = dev.alloc_pitched(tile.shape, "float32")
    s = dev.create_stream()
    pb.copy_from(tile, stream=s)
    out = np.zeros((200, 300), dtype=np.float32)
    target = out[50:150:2, 100:200]  # written in place through a strided view
    pb.copy_to_host(target, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(target, tile)
    assert out[:50].sum() == 0 and out[51::2].sum() == 0  # nothing outside the view was touched
    pb.close()
    s.close()


def test_3d_copies_pitched_packed_and_host(dev):
    vol = np.arange(6 * 7 * 9, dtype=np.uint16).reshape(6, 7, 9)
    pv = dev.alloc_pitched(vol.shape, "uint16")
    pv.copy_from(vol)
    np.testing.assert_array_equal(pv.copy_to_host(), vol)
    linear = dev.alloc(vol.size, "uint16")
    packed = cu.PitchedBuf.view_of(linear, vol.shape)
    assert packed.pitch == 9 * 2
    packed.copy_from(pv)  # device to device: pitched rows into packed rows
    np.testing.assert_array_equal(linear.copy_to_host(), vol.ravel())
    second = dev.alloc_pitched(vol.shape, "uint16")
    second.copy_from(packed)
    np.testing.assert_array_equal(second.copy_to_host(), vol)
    padded_host = np.zeros((6, 10, 16), dtype=np.uint16)  # slices of 10 rows, rows of 16: a 3-D sub-array
    second.copy_to_host(padded_host[:, :7, :9])
    np.testing.assert_array_equal(padded_host[:, :7, :9], vol)
    assert padded_host[:, 7:].sum() == 0 and padded_host[:, :, 9:].sum() == 0
    packed.close()
    assert packed.closed and not linear.closed  # a view does not own its buffer
    for x in (pv, second, linear):
        x.close()


def test_view_of_with_a_pitch(dev):
    linear = dev.alloc(4 * 64, "float32")  # 4 rows, 64 floats apart, 50 used
    linear.memset(0)
    pb = cu.PitchedBuf.view_of(linear, (4, 50), pitch=256)
    rows = np.arange(200, dtype=np.float32).reshape(4, 50)
    pb.copy_from(rows)
    host = linear.copy_to_host().reshape(4, 64)
    np.testing.assert_array_equal(host[:, :50], rows)
    assert host[:, 50:].sum() == 0
    linear.close()
    assert pb.closed


def test_sizes_are_checked_before_the_driver(dev):
    pb = dev.alloc_pitched((8, 16), "float32")
    for shape in ((8,), (0, 4), (2, 3, 4, 5), [8, 16], (8, -1), (8, 1.5)):
        with pytest.raises(InvalidArgument) as info:
            dev.alloc_pitched(shape, "float32")
        assert info.value.op == "cuMemAllocPitch"
    with pytest.raises(InvalidArgument, match="shape"):
        pb.copy_from(np.zeros((8, 15), np.float32))
    with pytest.raises(InvalidArgument, match="dtype"):
        pb.copy_from(np.zeros((8, 16), np.float64))
    with pytest.raises(InvalidArgument, match="contiguous"):
        pb.copy_from(np.zeros((8, 32), np.float32)[:, ::2])
    with pytest.raises(InvalidArgument, match="read-only"):
        frozen = np.zeros((8, 16), np.float32)
        frozen.flags.writeable = False
        pb.copy_to_host(frozen)
    with pytest.raises(InvalidArgument):
        pb.copy_to_host([[0.0] * 16] * 8)
    with pytest.raises(InvalidArgument, match="PitchedBuf.view_of"):
        pb.copy_from(dev.alloc(128, "float32"))
    with pytest.raises(InvalidArgument):
        pb.copy_from(dev.alloc_pitched((8, 16), "int32"))
    vol = dev.alloc_pitched((2, 3, 4), "uint8")
    with pytest.raises(InvalidArgument, match="slice stride"):
        vol.copy_from(np.lib.stride_tricks.as_strided(np.zeros(64, np.uint8), (2, 3, 4), (13, 4, 1)))
    linear = dev.alloc(100, "float32")
    with pytest.raises(InvalidArgument, match="need"):
        cu.PitchedBuf.view_of(linear, (10, 10), pitch=44)  # 9 * 44 + 40 bytes > 400
    with pytest.raises(InvalidArgument, match="pitch"):
        cu.PitchedBuf.view_of(linear, (10, 10), pitch=39)  # shorter than a row
    with pytest.raises(InvalidArgument):
        cu.PitchedBuf.view_of(np.zeros(4), (2, 2))
    with pytest.raises(InvalidArgument):
        pb.copy_from(np.zeros((8, 16), np.float32), stream="s")
    linear.close()
    with pytest.raises(ClosedError):
        cu.PitchedBuf.view_of(linear, (10, 10))
    pb.close()
    pb.close()
    with pytest.raises(ClosedError):
        pb.copy_from(np.zeros((8, 16), np.float32))
    with pytest.raises(ClosedError):
        pb.copy_to_host()
    with pytest.raises(ClosedError):
        vol.copy_from(pb)
    vol.close()
    with pytest.raises(TypeError):
        cu.PitchedBuf()
