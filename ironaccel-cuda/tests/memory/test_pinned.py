"""PinnedBuf and registering an existing array as pinned."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")


def test_pinned_buffer_as_numpy(dev):
    p = dev.alloc_pinned(1 << 20, "float32")
    arr = p.array
    assert isinstance(arr, np.ndarray) and arr.shape == (1 << 20,) and arr.dtype == np.float32
    assert arr.ctypes.data == p.ptr and p.nbytes == 4 << 20
    arr[:] = np.arange(1 << 20, dtype=np.float32)
    s = dev.create_stream()
    buf = dev.alloc(1 << 20, "float32", stream=s)
    buf.copy_from(arr, stream=s)  # truly asynchronous from pinned memory
    back = dev.alloc_pinned(1 << 20, "float32")
    buf.copy_to_host(back.array, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(back.array, arr)
    for x in (buf, p, back):
        x.close()
    p.close()
    s.close()
    with pytest.raises(ClosedError):
        p.array  # noqa: B018


def test_pinned_keeps_memory_while_arrays_live(dev):
    p = dev.alloc_pinned(16, "int32")
    arr = p.array
    assert p.array is arr  # one array while it lives
    gone = weakref.ref(p)
    del p  # the array keeps the PinnedBuf alive
    arr[:] = 5
    assert arr.sum() == 80 and gone() is not None
    del arr  # ... and nothing else does: the buffer and its page-locked memory go with the last array
    gc.collect()
    assert gone() is None


def test_register_existing_array(dev):
    data = np.arange(1 << 16, dtype=np.float64)
    buf = dev.alloc(data.size, "float64")
    s = dev.create_stream()
    with cu.pinned(data, dev) as registered:
        assert registered is data
        buf.copy_from(data, stream=s)
        out = np.empty_like(data)
        with cu.pinned(out, dev):
            buf.copy_to_host(out, stream=s)
            s.synchronize()
    np.testing.assert_array_equal(out, data)
    with cu.pinned(data, dev):  # registering again after the block is fine
        pass
    buf.close()
    s.close()


def test_pinned_bad_input(dev):
    with pytest.raises(InvalidArgument):
        with cu.pinned(np.zeros((8, 8))[:, ::2], dev):
            pass
    with pytest.raises(InvalidArgument):
        with cu.pinned(np.zeros(0), dev):
            pass
    with pytest.raises(InvalidArgument):
        with cu.pinned([1, 2, 3], dev):
            pass
    for size in (0, -4, 2**62, 1.5):
        with pytest.raises(InvalidArgument) as info:
            dev.alloc_pinned(size, "float32")
        assert info.value.op == "cuMemHostAlloc"


def test_a_failed_free_on_collection_is_said(dev, monkeypatch):
    """A PinnedBuf dropped without close() frees itself when collected; if that fails, a RuntimeWarning says
    so instead of the failure vanishing (the memory may be left page-locked)."""
    from ironaccel_cuda import _driver

    p = dev.alloc_pinned(16, "uint8")
    ptr = p.ptr
    real = _driver.call

    def failing(name, *args):
        if name == "cuMemFreeHost":
            raise RuntimeError("cuMemFreeHost: provoked by the test")
        return real(name, *args)

    monkeypatch.setattr(_driver, "call", failing)
    with pytest.warns(RuntimeWarning, match="PinnedBuf: freeing it on collection failed: .*provoked"):
        del p
        gc.collect()
    monkeypatch.setattr(_driver, "call", real)
    real("cuMemFreeHost", ptr)  # give the memory back for real
