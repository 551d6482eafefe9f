"""Bad input to memory -- pitched, VMM, managed, pools, allocators, batched copies -- gets a typed error.

Each case here once let something else out, or worse: a pitched shape whose element count wraps past
2**64 in `np.prod` (so a view claimed far more rows than its buffer has, and copies would have run
past it), a stream of another device taken as a buffer's home stream, a TypeError from hashing an
unhashable managed-memory choice, an OverflowError from the binding for a pool trim too wide for its C
type, an AttributeError for an allocator given something that is not a Device, and a numpy array as a
copy hint (ValueError: ambiguous truth).  Each now raises InvalidArgument (or ClosedError) naming the
operation, before any driver call.
Every check runs before the driver is asked, so the cases hold on a real GPU as on the fake driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from helpers.expect import raises_exactly

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")

# 274177 x 67280421310721 = 2**64 + 1: as int64 (np.prod) the row count wraps to 1.
WRAPS_TO_ONE = (274177, 67280421310721)


@contextmanager
def _foreign_stream(dev: Any) -> Iterator[Any]:
    """A stream of another device: device 1's where there is one, else one of `dev` marked as another's."""
    if cu.device_count() > 1:
        other = cu.Device(1 if dev.ordinal == 0 else 0)
        s = other.create_stream()
        yield s
        s.close()
        other.close()
        return
    s = dev.create_stream()
    s._ordinal = dev.ordinal + 1
    try:
        yield s
    finally:
        s._ordinal = dev.ordinal
        s.close()


# -- pitched memory ------------------------------------------------------------------------------------------


def test_pitched_shape_product_does_not_wrap(dev):
    # Once np.prod wrapped to 1 row: a 16-byte allocation (and a view of a 16-byte buffer) claimed 2**64 + 1 rows.
    shape = (*WRAPS_TO_ONE, 16)
    raises_exactly(InvalidArgument, "cuMemAllocPitch", dev.alloc_pitched, shape, "uint8")
    buf = dev.alloc(16, "uint8")
    raises_exactly(InvalidArgument, "PitchedBuf.view_of", cu.PitchedBuf.view_of, buf, shape)
    raises_exactly(InvalidArgument, "PitchedBuf.view_of", cu.PitchedBuf.view_of, buf, (1 << 32, 1 << 32, 1))
    buf.close()


def test_pitched_closed_copy_names_the_copy(dev):
    # Once ClosedError named "PitchedBuf.ptr", the property read inside, rather than the copy called.
    pb = dev.alloc_pitched((4, 8), "float32")
    pb.close()
    raises_exactly(ClosedError, "cuMemcpy2DAsync", pb.copy_from, np.zeros((4, 8), np.float32))
    raises_exactly(ClosedError, "cuMemcpy2DAsync", pb.copy_to_host, np.zeros((4, 8), np.float32))


def test_pitched_alloc_refuses_stream_of_another_device(dev):
    # Once taken as the buffer's home stream (dev.alloc refuses it).
    with _foreign_stream(dev) as s:
        raises_exactly(InvalidArgument, "cuMemAllocPitch", dev.alloc_pitched, (4, 8), "float32", stream=s)


# -- virtual memory --------------------------------------------------------------------------------------------


def test_vmm_refuses_stream_of_another_device(dev):
    vb = dev.reserve(1 << 21)
    vb.resize(1 << 21)
    va = cu.VirtualAllocator(dev)
    with _foreign_stream(dev) as s:
        raises_exactly(InvalidArgument, "VirtualBuffer.view", vb.view, "uint8", s)
        raises_exactly(InvalidArgument, "VirtualAllocator.allocate", va.allocate, 16, "uint8", s)
    assert not vb._views
    vb.close()


# -- choices given as unhashable objects: once TypeError("unhashable type") -------------------------------


def test_unhashable_managed_choices(dev):
    if not dev.attributes.managed_memory:
        pytest.skip("no managed memory on this device")
    m = cu.ManagedAllocator(dev)
    buf = m.allocate(1024)
    s = dev.create_stream()
    raises_exactly(InvalidArgument, "cuMemAdvise", cu.advise, buf, ["read_mostly"])
    raises_exactly(InvalidArgument, "cuStreamAttachMemAsync", cu.attach, buf, s, [])
    buf.close()
    s.close()


# -- ints too wide for the driver's C type: once OverflowError from the binding -------------------------


def test_pool_trim_past_64_bits(dev):
    pool = dev.create_driver_pool()
    raises_exactly(InvalidArgument, "cuMemPoolTrimTo", pool.trim, 1 << 64)
    pool.trim(0)  # still usable
    pool.close()


# -- not a Device: once AttributeError("'str' object has no attribute '_check_open'") ---------------------


@pytest.mark.parametrize("make, op", [
    (lambda d: cu.DirectAllocator(d), "DirectAllocator"),
    (lambda d: cu.VirtualAllocator(d), "VirtualAllocator"),
    (lambda d: cu.ManagedAllocator(d), "ManagedAllocator"),
    (lambda d: cu.MemPool(d), "MemPool"),
    (lambda d: cu.ExternalAllocator(d, lambda n, s: 0, lambda p, n, s: None), "ExternalAllocator"),
    (lambda d: cu.Stream.from_handle(0, d), "Stream.from_handle"),
])
def test_device_argument_must_be_a_device(make, op):
    for bad in ("cuda:0", 0, None):
        raises_exactly(InvalidArgument, op, make, bad)


def test_closed_device_argument(dev):
    other = cu.Device(0)
    other.close()
    raises_exactly(ClosedError, "DirectAllocator", cu.DirectAllocator, other)
    raises_exactly(ClosedError, "MemPool", cu.MemPool, other)


# -- batched copies --------------------------------------------------------------------------------------------


def test_copy_attributes_array_hint():
    # Once ValueError("The truth value of an array with more than one element is ambiguous").
    raises_exactly(InvalidArgument, "cuMemcpyBatchAsync", cu.CopyAttributes, src_hint=np.array([0, 1]))
    raises_exactly(InvalidArgument, "cuMemcpyBatchAsync", cu.CopyAttributes, dst_hint=(np.array(["host_numa"] * 2), 0))
