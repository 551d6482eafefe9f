"""Bad input to streams and host functions gets a typed error naming the call.

Each case here once let something else out: an OverflowError from the binding for a stream priority or a
stream handle too wide for its C type, and C host-function addresses silently cut to 64 bits by ctypes.
Each now raises InvalidArgument with the operation's name in `op` and in the message, before any driver
call, and leaves nothing behind (no stream or context push).
Every check runs before the driver is asked, so the cases hold on a real GPU as on the fake driver.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pytest
from helpers.expect import raises_exactly

import ironaccel_cuda as cu
from ironaccel import InvalidArgument

pytestmark = pytest.mark.backend("cuda")


# -- ints too wide for the driver's C type: once OverflowError from the binding -------------------------


def test_stream_priority_out_of_int32(dev):
    for priority in (1 << 31, -(1 << 31) - 1, 1 << 70):
        raises_exactly(InvalidArgument, "cuStreamCreateWithPriority", dev.create_stream, priority)
    ctx = dev.create_context()
    before = cu.current_context()
    raises_exactly(InvalidArgument, "cuStreamCreateWithPriority", ctx.create_stream, 1 << 40)
    assert cu.current_context() is before  # nothing pushed and left behind
    ctx.close()


def test_stream_from_handle_past_64_bits(dev):
    raises_exactly(InvalidArgument, "Stream.from_handle", cu.Stream.from_handle, 1 << 64, dev)


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
