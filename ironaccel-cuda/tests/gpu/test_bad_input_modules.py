"""Bad input to pitched memory, VMM, the linker, batched copies and C host functions gets a typed error.

Each case here once let something else out, or worse: a pitched shape whose element count wraps past
2**64 in `np.prod` (so a view claimed far more rows than its buffer has, and copies would have run
past it), a stream of another device taken as a buffer's home stream, a raw TypeError or
AttributeError from the linker's argument handling, a LinkSession option list that nvJitLink's
binding read as pointers (a segfault), a numpy array as a copy hint (ValueError: ambiguous truth),
and C host-function addresses silently cut to 64 bits.  Each now raises InvalidArgument (or
ClosedError) naming the operation, before any driver call.  Every check runs before the driver is
asked, so the cases hold on a real GPU as on the fake driver.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from expect import raises_exactly
from kernels import SOURCE

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument, NotAvailable

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


# -- linker ----------------------------------------------------------------------------------------------------


def test_linker_options_not_a_sequence(kernel_code):
    # Once TypeError("'int' object is not iterable"); a generator was consumed by the check and linked as ().
    raises_exactly(InvalidArgument, "nvJitLinkAddData", cu.Linker, kernel_code, options=5)
    raises_exactly(InvalidArgument, "nvJitLinkAddData", cu.Linker, kernel_code, options=None)
    assert cu.Linker(kernel_code, options=(o for o in ["-O3"])).options == ("-O3",)


def test_linker_object_code_of_bad_arch(kernel_code):
    # Once AttributeError("'NoneType' object has no attribute 'split'").
    from ironaccel_cuda.program import ObjectCode

    for arch in (None, 90):
        raises_exactly(InvalidArgument, "nvJitLinkAddData", cu.Linker, ObjectCode(kernel_code.code, "cubin", arch))


def test_link_session_bad_arguments(kernel_code):
    # Once a segfault (options [1]: the binding read the int as a char *) and raw TypeErrors.
    from ironaccel_cuda import linker

    try:
        linker._nvjitlink()
    except NotAvailable as exc:
        pytest.skip(f"nvJitLink is not installed: {exc}")
    for options in ([1], 5, "-arch=sm_90", ["-arch=sm_90\0"]):
        raises_exactly(InvalidArgument, "nvJitLinkCreate", linker.LinkSession, options)
    session = linker.LinkSession([f"-arch={kernel_code.arch}"])
    raises_exactly(InvalidArgument, "nvJitLinkAddData", session.add, [], kernel_code.code, "a")
    raises_exactly(InvalidArgument, "nvJitLinkAddData", session.add, "ptx", "text", "a")
    raises_exactly(InvalidArgument, "nvJitLinkAddData", session.add, "cubin", kernel_code.code, 5)
    raises_exactly(InvalidArgument, "nvJitLinkAddFile", session.add_file, {}, "x.a")
    raises_exactly(InvalidArgument, "nvJitLinkAddFile", session.add_file, "library", 5)
    ptx = bytearray(cu.Program(SOURCE).compile("ptx", arch=kernel_code.arch).code.rstrip(b"\0"))
    before = bytes(ptx)
    session.add("ptx", ptx, "saxpy.ptx")  # PTX gets its NUL on a copy: the caller's bytearray stays as it was
    assert ptx == before
    session.close()


# -- batched copies --------------------------------------------------------------------------------------------


def test_copy_attributes_array_hint():
    # Once ValueError("The truth value of an array with more than one element is ambiguous").
    raises_exactly(InvalidArgument, "cuMemcpyBatchAsync", cu.CopyAttributes, src_hint=np.array([0, 1]))
    raises_exactly(InvalidArgument, "cuMemcpyBatchAsync", cu.CopyAttributes, dst_hint=(np.array(["host_numa"] * 2), 0))


# -- C host functions ------------------------------------------------------------------------------------------


def test_c_host_function_addresses_past_64_bits(dev):
    # Once cut to their low 64 bits by ctypes: the function ran with user_data 5 instead of refusing 2**64 + 5.
    from ironaccel_cuda import hostfn

    seen: list[Any] = []
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(seen.append)
    address = ctypes.cast(fn, ctypes.c_void_p).value
    s = dev.create_stream()
    raises_exactly(InvalidArgument, "cuLaunchHostFunc", hostfn.launch_c, s, address, (1 << 64) + 5)
    raises_exactly(InvalidArgument, "cuLaunchHostFunc", hostfn.launch_c, s, (1 << 64) + address, 0)
    s.synchronize()
    assert seen == []
    s.close()
