"""DLPack capsules made and consumed with ctypes, exercised against numpy on the CPU."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from ironaccel import DType
from ironaccel_cuda import _dlpack


class Exporter:
    """Exports a numpy array's memory as a CPU DLPack tensor through our capsule code."""

    def __init__(self, array, versioned):
        self.array, self.versioned = array, versioned

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return _dlpack.export(self.array.ctypes.data, self.array.size, DType.of(self.array.dtype),
                              (_dlpack.KDL_CPU, 0), self.array, self.versioned)

    def __dlpack_device__(self):
        return (_dlpack.KDL_CPU, 0)


@pytest.mark.parametrize("versioned", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "int8", "uint64", "float16", "complex128", "bool"])
def test_numpy_consumes_our_capsules(versioned, dtype):
    src = (np.arange(20) % 2).astype(dtype) if dtype == "bool" else np.arange(20).astype(dtype)
    live = _dlpack.live_exports()
    out = np.from_dlpack(Exporter(src, versioned))
    assert out.dtype == src.dtype and out.ctypes.data == src.ctypes.data
    np.testing.assert_array_equal(out, src)
    assert _dlpack.live_exports() == live + 1
    del out
    gc.collect()
    assert _dlpack.live_exports() == live  # numpy called our deleter


class StridedExporter(Exporter):
    """Exports an n-dimensional, possibly strided array (shape and strides in elements) and its read-only flag."""

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        a = self.array
        strides = tuple(s // a.itemsize for s in a.strides)
        return _dlpack.export(a.ctypes.data, a.shape, DType.of(a.dtype), (_dlpack.KDL_CPU, 0), a, self.versioned,
                              strides=strides, readonly=not a.flags.writeable)


@pytest.mark.parametrize("versioned", [False, True])
def test_numpy_consumes_our_strided_capsules(versioned):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    src = base.T[1:, ::2]  # 2-D, neither C- nor F-contiguous
    live = _dlpack.live_exports()
    out = np.from_dlpack(StridedExporter(src, versioned))
    assert out.shape == src.shape and out.strides == src.strides and out.ctypes.data == src.ctypes.data
    np.testing.assert_array_equal(out, src)
    del out
    gc.collect()
    assert _dlpack.live_exports() == live
    if versioned:  # the read-only flag reaches a versioned consumer
        frozen = base.copy()
        frozen.flags.writeable = False
        assert not np.from_dlpack(StridedExporter(frozen, True)).flags.writeable


def test_unconsumed_capsule_runs_the_deleter():
    live = _dlpack.live_exports()
    capsule = Exporter(np.zeros(4, np.float32), False).__dlpack__()
    assert _dlpack.live_exports() == live + 1
    del capsule
    assert _dlpack.live_exports() == live


class CudaExporter(Exporter):
    """Says its tensor is on a CUDA device, which numpy refuses after taking the capsule."""

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return _dlpack.export(self.array.ctypes.data, self.array.size, DType.of(self.array.dtype),
                              (_dlpack.KDL_CUDA, 0), self.array, self.versioned)


@pytest.mark.parametrize("versioned", [False, True])
def test_a_refusing_consumer_keeps_its_error_and_the_export_is_dropped(versioned):
    # The capsule dies while numpy's error is pending: the destructor must neither lose that error (a SystemError
    # "returned NULL without setting an exception" before) nor give up and keep the export alive for good.
    live = _dlpack.live_exports()
    for _ in range(3):
        with pytest.raises((RuntimeError, BufferError), match="Unsupported device"):  # numpy < 2.5, >= 2.5
            np.from_dlpack(CudaExporter(np.zeros(4, np.float32), versioned))
    gc.collect()
    assert _dlpack.live_exports() == live


@pytest.mark.parametrize("versioned", [False, True])
def test_we_consume_numpy_capsules(versioned):
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    capsule = a.__dlpack__(max_version=(1, 0)) if versioned else a.__dlpack__()
    imp = _dlpack.consume(capsule)
    assert imp.ptr == a.ctypes.data and imp.shape == (3, 4) and imp.dtype is DType.INT16
    assert imp.device_type == _dlpack.KDL_CPU and imp.contiguous and imp._versioned == versioned
    with pytest.raises(TypeError):
        _dlpack.consume(capsule)  # already used
    imp.release()
    imp.release()  # once only


def test_non_contiguous_is_detected():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    imp = _dlpack.consume(a.__dlpack__())
    assert not imp.contiguous
    imp.release()
    t = np.arange(12, dtype=np.float32).reshape(3, 4).T
    imp = _dlpack.consume(t.__dlpack__())
    assert not imp.contiguous
    imp.release()


def test_dtype_codes():
    for dt in DType:
        code, bits = _dlpack.dl_dtype(dt)
        assert _dlpack.dtype_from_dl(code, bits, 1) is dt
    with pytest.raises(TypeError):
        _dlpack.dtype_from_dl(2, 32, 4)
    with pytest.raises(TypeError):
        _dlpack.consume(object())
