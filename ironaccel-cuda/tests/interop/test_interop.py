"""Interop with CuPy, PyTorch and cuda.core (installed on the GPU machine): DLPack and CAI both ways, streams."""

from __future__ import annotations

import numpy as np
import pytest

import ironaccel_cuda as cu
from ironaccel import InvalidArgument
from ironaccel_cuda import _dlpack

pytestmark = pytest.mark.backend("cuda")


class _DLPackOnly:
    """Hides __cuda_array_interface__ so that the DLPack path is taken."""

    def __init__(self, obj):
        self.obj = obj

    def __dlpack__(self, **kwargs):
        return self.obj.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.obj.__dlpack_device__()


def test_torch():
    torch = pytest.importorskip("torch")
    dev = cu.Device(0)
    data = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    buf = dev.upload(data)
    t = torch.from_dlpack(buf)  # ours -> torch, zero copy
    assert t.device.type == "cuda" and t.data_ptr() == buf.ptr and t.dtype == torch.float32
    np.testing.assert_array_equal(t.cpu().numpy(), data)
    t.mul_(2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(buf.copy_to_host(), 2 * data)
    del buf  # the capsule's keepalive holds our buffer while torch uses it
    t.add_(1)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(t.cpu().numpy(), 2 * data + 1)
    del t
    tt = torch.arange(64, dtype=torch.int32, device="cuda")
    view = cu.DeviceBuf.from_foreign(tt)  # torch -> ours via CAI
    assert view.ptr == tt.data_ptr() and view.dtype.value == "int32"
    np.testing.assert_array_equal(view.copy_to_host(), np.arange(64, dtype=np.int32))
    view.close()
    live = _dlpack.live_exports()
    dl = cu.DeviceBuf.from_foreign(_DLPackOnly(tt))  # torch -> ours via DLPack
    assert dl.ptr == tt.data_ptr()
    np.testing.assert_array_equal(dl.copy_to_host(), np.arange(64, dtype=np.int32))
    dl.close()
    assert _dlpack.live_exports() == live
    with pytest.raises(InvalidArgument):
        cu.DeviceBuf.from_foreign(torch.zeros(4, 4, device="cuda").t())  # not contiguous
    torch_stream = torch.cuda.Stream()
    ours = cu.Stream.from_handle(torch_stream.cuda_stream, dev)
    ours.synchronize()
    dev.close()


def test_cupy():
    cp = pytest.importorskip("cupy")
    dev = cu.Device(0)
    data = np.arange(4096, dtype=np.float64)
    buf = dev.upload(data)
    a = cp.asarray(buf)  # CAI
    assert a.data.ptr == buf.ptr
    np.testing.assert_array_equal(cp.asnumpy(a), data)
    b = cp.from_dlpack(buf)  # DLPack
    assert b.data.ptr == buf.ptr
    b += 1
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(buf.copy_to_host(), data + 1)
    c = cp.arange(100, dtype=cp.float32)
    view = cu.DeviceBuf.from_foreign(c)
    assert view.ptr == c.data.ptr and view.size == 100
    np.testing.assert_array_equal(view.copy_to_host(), np.arange(100, dtype=np.float32))
    dst = dev.alloc(100, "float32")
    dst.copy_from(c)  # copy straight from a CuPy array
    np.testing.assert_array_equal(dst.copy_to_host(), np.arange(100, dtype=np.float32))
    s = dev.create_stream()
    with cp.cuda.ExternalStream(s.handle):
        d = cp.ones(10)
        d *= 3
    s.synchronize()
    assert float(d.sum()) == 30.0
    for x in (view, dst, buf):
        x.close()
    s.close()
    dev.close()


def _cuda_core():
    core = pytest.importorskip("cuda.core")
    if not hasattr(core, "Device"):
        core = pytest.importorskip("cuda.core.experimental")
    return core


def test_cuda_core():
    core = _cuda_core()
    dev = cu.Device(0)
    cdev = core.Device(0)
    cdev.set_current()
    s = dev.create_stream()
    cs = cdev.create_stream(s)  # through __cuda_stream__
    assert int(cs.handle) == s.handle
    try:
        cbuf = cdev.allocate(4096, stream=cs)
    except TypeError:
        cbuf = cdev.allocate(4096)
    view = cu.DeviceBuf.from_foreign(cbuf)  # cuda.core Buffer -> ours via DLPack
    assert view.ptr == int(cbuf.handle) and view.nbytes == 4096
    view.memset(7)
    np.testing.assert_array_equal(view.copy_to_host(), np.full(view.size, 7, view.dtype.numpy))
    view.close()
    cbuf.close()
    ours = dev.alloc(256, "float32")
    ours.memset(0)
    from_ours = core.Buffer.from_handle(ours.ptr, ours.nbytes, owner=ours)  # cuda.core over our memory
    assert int(from_ours.handle) == ours.ptr
    del from_ours
    ours.close()
    s.close()
    dev.close()
