"""Pinned memory flags: mapped (device views of host memory), write-combined, portable; registration flags.

Only memory allocated or registered with mapped=True is asserted to have a device view: on unified-addressing
systems the driver may map other page-locked memory too, which these tests neither rely on nor forbid.
"""

from __future__ import annotations

import numpy as np
import pytest

import ironaccel_cuda as cu
from ironaccel import ClosedError, DriverError, InvalidArgument, Unsupported
from ironaccel_cuda.driver_pool import device_attribute

pytestmark = pytest.mark.backend("cuda")


def test_mapped_pinned_memory_is_used_by_kernels_in_place(dev, kernels):
    n = 1 << 16
    p = dev.alloc_pinned(n, "float32", mapped=True)
    assert p.mapped and p.portable and not p.write_combined
    p.array[:] = np.arange(n, dtype=np.float32)
    view = dev.device_view(p.array)
    assert view.size == n and view.dtype.value == "float32" and view.device is dev
    out = dev.alloc_pinned(n, "float32", mapped=True)
    out.array[:] = 0
    kernels.function("scale_offset").launch(n // 256, 256, view, dev.device_view(out.array), 3.0, 1.0, n)
    dev.synchronize()
    np.testing.assert_array_equal(out.array, 3 * np.arange(n, dtype=np.float32) + 1)  # written over the bus
    part = dev.device_view(p.array[1000:2000])  # part of a mapped allocation is mapped too
    assert part.ptr == view.ptr + 4000
    for x in (view, part, p, out):
        x.close()


def test_write_combined_and_not_portable(dev):
    p = dev.alloc_pinned(1 << 20, "uint8", write_combined=True, portable=False)
    assert p.write_combined and not p.portable and not p.mapped
    data = np.random.default_rng(3).integers(0, 256, 1 << 20, dtype=np.uint8)
    p.array[:] = data  # the host writes write-combined memory; the device reads it
    buf = dev.alloc(1 << 20)
    s = dev.create_stream()
    buf.copy_from(p.array, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(buf.copy_to_host(), data)
    for x in (buf, p, s):
        x.close()


def test_registered_mapped_array(dev, kernels):
    n = 4096
    both = np.zeros(2 * n, dtype=np.float32)  # one registration: two small arrays may share a page, which fails
    data, out = both[:n], both[n:]
    data[:] = np.arange(n, dtype=np.float32)
    with cu.pinned(both, dev, mapped=True):
        kernels.function("scale_offset").launch(n // 256, 256, dev.device_view(data), dev.device_view(out), 2.0,
                                                0.0, n)
        dev.synchronize()
    np.testing.assert_array_equal(out, 2 * np.arange(n, dtype=np.float32))
    with pytest.raises((InvalidArgument, DriverError), match="not mapped"):
        dev.device_view(data)  # no longer registered: pageable memory has no device address


def test_read_only_registration(dev):
    frozen = np.frombuffer(np.arange(1 << 16, dtype=np.int32).tobytes(), dtype=np.int32)
    assert not frozen.flags.writeable
    with pytest.raises(InvalidArgument, match="read_only=True"):
        with cu.pinned(frozen, dev):
            pass
    if not device_attribute(dev, "READ_ONLY_HOST_REGISTER_SUPPORTED"):
        with pytest.raises(Unsupported):
            with cu.pinned(frozen, dev, read_only=True):
                pass
        return
    buf = dev.alloc(frozen.size, "int32")
    s = dev.create_stream()
    with cu.pinned(frozen, dev, read_only=True):
        buf.copy_from(frozen, stream=s)  # the device reads the read-only registration
        s.synchronize()
    np.testing.assert_array_equal(buf.copy_to_host(), frozen)
    buf.close()
    s.close()


def test_bad_input(dev):
    for kwargs in ({"mapped": 1}, {"write_combined": "yes"}, {"portable": None}):
        with pytest.raises(InvalidArgument):
            dev.alloc_pinned(16, **kwargs)
    arr = np.zeros(16)
    for kwargs in ({"mapped": 1}, {"read_only": "no"}, {"portable": 0}):
        with pytest.raises(InvalidArgument):
            with cu.pinned(arr, dev, **kwargs):
                pass
    with pytest.raises((InvalidArgument, DriverError)):
        dev.device_view(np.zeros(16))  # pageable memory has no device address
    with pytest.raises(InvalidArgument):
        dev.device_view([1, 2, 3])
    with pytest.raises(InvalidArgument):
        dev.device_view(np.zeros((4, 4))[:, ::2])
    with pytest.raises(InvalidArgument):
        dev.device_view(np.zeros(0))
    other = cu.Device(0)
    other.close()
    with pytest.raises(ClosedError):
        other.device_view(np.zeros(4))
    with pytest.raises(ClosedError):
        other.alloc_pinned(4, mapped=True)


def _host_array(ptr, n, dtype=np.float32):
    """A numpy array over `n` elements of host memory at `ptr` (no owner: the test frees it)."""
    import ctypes

    return np.frombuffer((ctypes.c_char * (n * np.dtype(dtype).itemsize)).from_address(ptr), dtype)


def test_host_memory_by_address_in_the_current_context(dev):
    """host_alloc / host_register and friends work in whatever context is current, by address: the memory is
    page-locked (its flags read back), mapped memory's device address reads the host's data, and ironaccel's
    copies treat it as pinned until it is freed or unregistered."""
    from ironaccel_cuda import _core
    from ironaccel_cuda.memory import adopt

    n = 1 << 14
    dev.bind()
    ptr = cu.host_alloc(4 * n, mapped=True)
    try:
        assert _core.pinned_known(ptr, 4 * n)
        got = cu.host_flags(ptr)
        assert got.mapped and got.portable and not got.write_combined
        host = _host_array(ptr, n)
        host[:] = np.arange(n, dtype=np.float32)
        dptr = cu.host_device_pointer(ptr)
        view = adopt(dptr, n, "float32", dev)  # the device's address of the same bytes
        np.testing.assert_array_equal(view.copy_to_host(), np.arange(n, dtype=np.float32))
        buf = dev.alloc(n, "float32")
        buf.copy_from(host)
        np.testing.assert_array_equal(buf.copy_to_host(), host)
        for x in (view, buf):
            x.close()
    finally:
        cu.host_free(ptr)
    assert not _core.pinned_known(ptr, 4 * n)
    wc = cu.host_alloc(4096, portable=False, write_combined=True)
    got = cu.host_flags(wc)  # (mapped not asserted: unified addressing may map all page-locked memory)
    assert got.write_combined and not got.portable
    cu.host_free(wc)

    data = np.zeros(2 * n, np.float32)
    cu.host_register(data.ctypes.data, data.nbytes, mapped=True)
    try:
        assert _core.pinned_known(data.ctypes.data, data.nbytes)
        data[:] = 7
        view = adopt(cu.host_device_pointer(data.ctypes.data), data.size, "float32", dev)
        view.memset(0)  # the device writes the registered host memory
        dev.synchronize()
        assert not data.any()
        view.close()
    finally:
        cu.host_unregister(data.ctypes.data)
    assert not _core.pinned_known(data.ctypes.data, data.nbytes)
    with pytest.raises(DriverError) as info:  # pageable memory again: no flags
        cu.host_flags(data.ctypes.data)
    assert info.value.op == "cuMemHostGetFlags" and info.value.code is not None


def test_host_memory_by_address_bad_input(dev):
    dev.bind()
    refusals = (
        (lambda: cu.host_alloc(0), "cuMemHostAlloc"), (lambda: cu.host_alloc(1 << 64), "cuMemHostAlloc"),
        (lambda: cu.host_alloc(1.5), "cuMemHostAlloc"), (lambda: cu.host_alloc(8, mapped=1), "cuMemHostAlloc"),
        (lambda: cu.host_free(0), "cuMemFreeHost"), (lambda: cu.host_free(-1), "cuMemFreeHost"),
        (lambda: cu.host_register(None, 8), "cuMemHostRegister"),
        (lambda: cu.host_register(4096, 0), "cuMemHostRegister"),
        (lambda: cu.host_register(4096, 8, read_only="no"), "cuMemHostRegister"),
        (lambda: cu.host_unregister(True), "cuMemHostUnregister"),
        (lambda: cu.host_device_pointer(1 << 64), "cuMemHostGetDevicePointer"),
        (lambda: cu.host_flags("x"), "cuMemHostGetFlags"),
    )
    for call, op in refusals:
        with pytest.raises(InvalidArgument) as info:
            call()
        assert info.value.op == op and info.value.code is None  # refused before the driver
    pageable = np.zeros(64, np.float32)
    with pytest.raises(DriverError) as info:  # the driver's own refusal, typed and named
        cu.host_device_pointer(pageable.ctypes.data)
    assert info.value.op == "cuMemHostGetDevicePointer" and info.value.code is not None
    with pytest.raises(DriverError) as info:
        cu.host_unregister(pageable.ctypes.data)
    assert info.value.op == "cuMemHostUnregister" and info.value.code is not None
