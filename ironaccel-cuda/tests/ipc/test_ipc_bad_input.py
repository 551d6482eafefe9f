"""Bad input to IPC gets a typed error naming the call.

Each case here once let something else out: a half-checked pool descriptor (an out-of-range pointer, or an
OverflowError after the import was counted and never released) and an unpicklable object given to
`ipc.send`.  Each now raises InvalidArgument with the operation's name in `op` and in the message, before any
driver call, and leaves nothing behind (no IPC import).
Every check runs before the driver is asked, so the cases hold on a real GPU as on the fake driver.
"""

from __future__ import annotations

import dataclasses
import pickle
import socket

import pytest
from helpers.expect import raises_exactly

from ironaccel import ClosedError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")


# -- IPC ---------------------------------------------------------------------------------------------


def test_ipc_descriptor_offset_checked_before_import(dev):
    """A pool descriptor whose offset is not one export makes: InvalidArgument before anything is imported
    (once an out-of-range pointer, or an OverflowError after the import was counted and never released)."""
    from ironaccel_cuda import ipc

    if not dev.attributes.memory_pools_supported:
        pytest.skip("no memory pools on this device")
    pool = dev.create_driver_pool(ipc=True)
    buf = pool.allocate(16)
    desc = ipc.export(buf)
    imports = ipc._imports.count()
    for offset in (-1, 1 << 48, 1 << 70, 1.5, "0"):
        # another pid: the same-process refusal comes first otherwise; the offset check precedes any driver call
        bad = dataclasses.replace(desc, pid=desc.pid + 1, offset=offset)
        raises_exactly(InvalidArgument, "cuMemPoolImportPointer", bad.open)
        assert ipc._imports.count() == imports
    bad = dataclasses.replace(desc, pid=desc.pid + 1, handle="x" * 64)
    raises_exactly(InvalidArgument, "cuMemPoolImportPointer", bad.open)
    assert ipc._imports.count() == imports
    buf.close()
    pool.close()


def test_ipc_send_unpicklable():
    from ironaccel_cuda import ipc

    a, b = socket.socketpair()
    try:
        err = raises_exactly(InvalidArgument, "ipc.send", ipc.send, a, lambda: None)
        assert isinstance(err.__cause__, (pickle.PicklingError, AttributeError, TypeError))
        raises_exactly(InvalidArgument, "ipc.send", ipc.send, a, threading_lock())
        ipc.send(a, {"still": "works"})  # the fd bookkeeping was reset
        assert ipc.recv(b) == {"still": "works"}
    finally:
        a.close()
        b.close()


def threading_lock():
    import threading

    return threading.Lock()


def test_handle_bytes_round_trip_and_refuse_what_is_not_a_handle(dev):
    """ipc.handle_bytes / handle_from_bytes: a cuda.bindings IPC handle as the 64 bytes a descriptor carries."""
    from cuda.bindings import driver

    from ironaccel_cuda import ipc

    data = bytes(range(64))
    for cls in (driver.CUipcEventHandle, driver.CUipcMemHandle, driver.CUmemPoolPtrExportData):
        handle = ipc.handle_from_bytes(cls, data)
        assert isinstance(handle, cls) and ipc.handle_bytes(handle) == data
        assert ipc.handle_bytes(ipc.handle_from_bytes(cls, bytearray(data))) == data
    assert ipc.HANDLE_SIZE == 64
    for bad in (data[:63], data + b"\0", "x" * 64, None):
        raises_exactly(InvalidArgument, "ipc.handle_from_bytes", ipc.handle_from_bytes, driver.CUipcEventHandle, bad)
    raises_exactly(InvalidArgument, "ipc.handle_bytes", ipc.handle_bytes, data)


def test_raw_handle_functions_check_their_input_first(dev):
    """ipc's handle functions by address: InvalidArgument naming the driver call, before the driver is asked."""
    import ironaccel_cuda as cu

    dev.bind()
    closed_event = cu.ipc.create_event(dev)
    closed_event.close()
    cases = (
        (lambda: cu.ipc.memory_handle(0), "cuIpcGetMemHandle"),
        (lambda: cu.ipc.memory_handle("0x10"), "cuIpcGetMemHandle"),
        (lambda: cu.ipc.open_memory_handle(b"x" * 63), "cuIpcOpenMemHandle"),
        (lambda: cu.ipc.open_memory_handle(None), "cuIpcOpenMemHandle"),
        (lambda: cu.ipc.open_memory_handle(bytes(64), lazy_peer_access=1), "cuIpcOpenMemHandle"),
        (lambda: cu.ipc.close_memory_handle(-5), "cuIpcCloseMemHandle"),
        (lambda: cu.ipc.event_handle(None), "cuIpcGetEventHandle"),
        (lambda: cu.ipc.event_handle(0), "cuIpcGetEventHandle"),
        (lambda: cu.ipc.open_event_handle(bytearray(65)), "cuIpcOpenEventHandle"),
    )
    for call, op in cases:
        with pytest.raises(InvalidArgument) as info:
            call()
        assert info.value.op == op and info.value.code is None
    with pytest.raises(ClosedError) as info:
        cu.ipc.event_handle(closed_event)
    assert info.value.op == "cuIpcGetEventHandle"
