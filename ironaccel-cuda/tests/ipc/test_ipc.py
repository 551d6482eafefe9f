"""CUDA IPC across two processes on one GPU: pool and legacy buffers both ways, events, lifetime, sockets, bad input.

Children are started with multiprocessing's spawn method (CUDA is initialised here); what they run is in
ipc_children.py.  Under the fake driver a pool's memory is a memfd both processes map, so the pool tests
run there too; legacy handles cannot be (the fake's cuMemAlloc memory is private to its process).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import pickle
import socket

import numpy as np
import pytest
from helpers import FAKE, ipc_children

import ironaccel_cuda as cu
from ironaccel import ClosedError, DriverError, InvalidArgument, InvalidState

pytestmark = pytest.mark.backend("cuda")

CTX = multiprocessing.get_context("spawn")
TIMEOUT = 120


def start(target, *args):
    parent, child = CTX.Pipe()
    proc = CTX.Process(target=target, args=(*args, child))
    proc.start()
    child.close()
    return proc, parent


def answer(proc, conn):
    assert conn.poll(TIMEOUT), "the child did not answer in time"
    try:
        reply = conn.recv()
    except EOFError:  # the child died before it could answer: say how
        proc.join(TIMEOUT)
        raise AssertionError(f"the child exited without answering (exit code {proc.exitcode})") from None
    assert reply[0] != "error", reply[1]
    return reply


def finish(proc):
    proc.join(TIMEOUT)
    assert proc.exitcode == 0, f"child exit code {proc.exitcode}"


@pytest.fixture
def ipc_pool(dev):
    pool = dev.create_driver_pool(ipc=True)
    yield pool
    pool.close()


def test_child_maps_parent_pool_buffer_and_writes(dev, ipc_pool):
    n = 1 << 18  # 1 MiB of float32
    buf = ipc_pool.allocate(n, "float32")
    buf.copy_from(np.arange(n, dtype=np.float32))
    used = ipc_pool.usage().used
    desc = cu.ipc.export(buf)
    assert desc.kind == "pool" and desc.size == n and desc.dtype == "float32" and desc.offset == 0
    proc, conn = start(ipc_children.check_and_write, desc, 0.0, 7.0)
    _, first, total, via_second, still, size_ok, _ = answer(proc, conn)
    finish(proc)
    assert first == 0.0 and total == float(np.arange(n, dtype=np.float64).sum()) and size_ok
    assert via_second == 7.0 and still == 7.0
    # the importer closed both mappings: the memory and the exporter's accounting are untouched
    np.testing.assert_array_equal(buf.copy_to_host(), np.full(n, 7.0, np.float32))
    assert ipc_pool.usage().used == used and ipc_pool.outstanding() == n * 4
    buf.close()
    dev.synchronize()
    assert ipc_pool.usage().used == 0


def test_descriptors_without_their_pool_open_where_the_pool_is_open(dev, ipc_pool):
    """`desc.without_pool()` drops the pool's file descriptor (each one sent costs its passage): it names the pool
    by key and opens only where that pool is open, with a typed error before."""
    bufs = [ipc_pool.allocate(256, "float32") for _ in range(3)]
    for i, b in enumerate(bufs):
        b.memset(float(i + 1))
    dev.synchronize()
    full = cu.ipc.export(bufs[0])
    light = [cu.ipc.export(b).without_pool() for b in bufs]
    assert all(d.pool is None and d.pool_key == full.pool.key for d in light)
    assert light[0].without_pool() is light[0] and pickle.loads(pickle.dumps(light[0])) == light[0]
    proc, conn = start(ipc_children.open_without_pool, cu.ipc.export(ipc_pool), light)
    _, error, values = answer(proc, conn)
    finish(proc)
    assert error == "InvalidState" and values == [1.0, 2.0, 3.0]
    for b in bufs:
        b.close()


def test_a_buffer_exports_one_descriptor_while_it_and_its_pool_are_open(dev):
    """export() keeps a pool buffer's descriptor and without_pool() its pool-less copy (neither pickles the
    cache); a view has its own; once the pool is closed (its file descriptor with it) or the buffer is, export
    says which is closed."""
    pool = dev.create_driver_pool(ipc=True)
    buf = pool.allocate(256, "float32")
    desc = cu.ipc.export(buf)
    bare = desc.without_pool()
    assert cu.ipc.export(buf) is desc and desc.without_pool() is bare and bare.pool is None
    assert "_bare" not in desc.__getstate__() and pickle.loads(pickle.dumps(bare)) == bare
    view = cu.ipc.export(buf[8:16])
    assert view is not desc and view.offset == 32 and view.size == 8 and view.handle == desc.handle
    assert cu.ipc.export(buf[8:16]) == view
    pool.close()  # the buffer stays valid until it is closed
    with pytest.raises(ClosedError, match="driver pool"):
        cu.ipc.export(buf)
    buf.close()
    with pytest.raises(ClosedError, match="buffer"):
        cu.ipc.export(buf)


def test_a_release_inside_the_import_section_waits_for_its_end(dev, ipc_pool):
    """A buffer collected while its thread holds the import bookkeeping's lock (any allocation there can collect
    one) is released when that section ends, not deadlocked on the lock; the other mapping of it stays."""
    buf = ipc_pool.allocate(64, "float32")
    buf.memset(3.0)
    dev.synchronize()
    proc, conn = start(ipc_children.release_inside_the_section, cu.ipc.export(buf))
    _, inside, after, value, mapped, pools = answer(proc, conn)
    finish(proc)
    assert inside == (2, 1) and after == 1 and value == 3.0 and not mapped and pools == 0
    buf.close()


def test_an_allocations_export_data_is_made_once_while_it_lives(dev, ipc_pool, monkeypatch):
    """cuMemPoolExportPointer runs once per allocation (its data is fixed for the allocation's life): every later
    export of it or of a view reuses the bytes; a freed allocation's bytes are dropped, so a later allocation
    (at the same address or not) exports its own, and its descriptor still opens in a child."""
    from ironaccel_cuda import ipc

    calls = []
    real = ipc.call

    def counting(op, *args):
        if op == "cuMemPoolExportPointer":
            calls.append(op)
        return real(op, *args)

    monkeypatch.setattr(ipc, "call", counting)
    buf = ipc_pool.allocate(1024, "float32")
    first = cu.ipc.export(buf)
    assert cu.ipc.export(buf).handle == first.handle and cu.ipc.export(buf[10:20]).handle == first.handle
    assert len(calls) == 1
    buf.close()
    assert ipc_pool._export_data == {}
    again = ipc_pool.allocate(1024, "float32")
    again.memset(4.0)
    dev.synchronize()
    desc = cu.ipc.export(again)
    assert len(calls) == 2
    proc, conn = start(ipc_children.check_and_write, desc, 4.0, 5.0)
    _, value, *_ = answer(proc, conn)
    finish(proc)
    assert value == 4.0
    np.testing.assert_array_equal(again.copy_to_host(), np.full(1024, 5.0, np.float32))
    again.close()


def test_view_of_a_pool_buffer_is_exported_at_its_offset(dev, ipc_pool):
    buf = ipc_pool.allocate(4096, "float32")
    buf.copy_from(np.arange(4096, dtype=np.float32))
    view = buf[1000:1100]
    desc = cu.ipc.export(view)
    assert desc.offset == 4000 and desc.size == 100
    proc, conn = start(ipc_children.check_and_write, desc, 1000.0, -1.0)
    _, first, total, *_ = answer(proc, conn)
    finish(proc)
    assert first == 1000.0 and total == float(sum(range(1000, 1100)))
    host = buf.copy_to_host()
    np.testing.assert_array_equal(host[1000:1100], np.full(100, -1.0, np.float32))
    np.testing.assert_array_equal(host[:1000], np.arange(1000, dtype=np.float32))  # only the view was written
    np.testing.assert_array_equal(host[1100:], np.arange(1100, 4096, dtype=np.float32))
    buf.close()


def test_an_offset_past_the_imported_allocation_is_refused(dev, ipc_pool):
    """A descriptor whose offset is within the address space but past the allocation it names: InvalidArgument
    from the importer, which keeps nothing imported (once a DeviceBuf past the memory, whose first use faults)."""
    buf = ipc_pool.allocate(4096, "float32")
    buf.memset(6.0)
    desc = cu.ipc.export(buf)
    bad = dataclasses.replace(desc, offset=1 << 40)
    proc, conn = start(ipc_children.open_past_the_end, bad, desc)
    _, name, op, message, counted, first, left = answer(proc, conn)
    finish(proc)
    assert (name, op) == ("InvalidArgument", "cuMemPoolImportPointer"), message
    assert "the descriptor asks for" in message
    assert counted == 0 and left == 0  # the refused import was released, pool included
    assert first == 6.0
    buf.close()


def test_parent_maps_child_pool_buffer_and_writes(dev):
    n = 1 << 16
    proc, conn = start(ipc_children.export_to_parent, n)
    kind, desc = answer(proc, conn)
    assert kind == "desc" and desc.kind == "pool"
    buf = desc.open()
    assert buf.device.uuid == dev.uuid and buf.size == n
    np.testing.assert_array_equal(buf.copy_to_host(), np.arange(n, dtype=np.float32))
    buf.memset(3.0)
    buf.close()  # the free of the import has completed when close() returns
    conn.send("written")
    _, low, high, used = answer(proc, conn)
    finish(proc)
    assert low == high == 3.0 and used >= n * 4  # the child's allocation was not freed by our close
    assert cu.ipc._imports.count() == 0  # the imported pool went with its last buffer


@pytest.mark.skipif(FAKE, reason="the fake's cuMemAlloc memory is private to its process: legacy handles cannot map")
def test_legacy_handle_child_writes_parent_reads(dev):
    direct = cu.DirectAllocator(dev)
    n = 1 << 18
    buf = direct.allocate(n, "float32")
    buf.copy_from(np.arange(n, dtype=np.float32))
    desc = cu.ipc.export(buf[16:])
    assert desc.kind == "legacy" and desc.offset == 64
    proc, conn = start(ipc_children.check_and_write, desc, 16.0, 5.0)
    _, first, _, via_second, still, size_ok, _ = answer(proc, conn)
    finish(proc)
    assert first == 16.0 and via_second == 5.0 and still == 5.0 and size_ok
    host = buf.copy_to_host()
    assert (host[:16] == np.arange(16)).all() and (host[16:] == 5.0).all()
    buf.close()
    assert direct.outstanding() == 0


@pytest.mark.skipif(FAKE, reason="the fake's cuMemAlloc memory is private to its process: legacy handles cannot map")
def test_raw_handles_by_address_open_in_the_childs_current_context(dev):
    """ipc.memory_handle / event_handle give the driver's handle bytes; the child opens them in its current context
    (open_memory_handle, open_event_handle), waits on the event, reads the parent's data and writes its own."""
    direct = cu.DirectAllocator(dev)
    n = 1 << 18
    buf = direct.allocate(n, "float32")
    s = dev.create_stream()
    event = cu.ipc.create_event(dev)
    buf.copy_from(np.arange(n, dtype=np.float32), stream=s)
    event.record(s)
    dev.bind()
    mem, ev = cu.ipc.memory_handle(buf.ptr), cu.ipc.event_handle(event)
    assert len(mem) == len(ev) == cu.ipc.HANDLE_SIZE and cu.ipc.event_handle(event.handle) == ev
    proc, conn = start(ipc_children.open_raw_handles, mem, ev, n, 5.0)
    _, first, total = answer(proc, conn)
    finish(proc)
    assert first == 0.0 and total == float(np.arange(n, dtype=np.float32).sum())
    assert (buf.copy_to_host() == 5.0).all()
    for x in (buf, event, s):
        x.close()
    assert direct.outstanding() == 0


def test_raw_handles_refused_where_the_driver_has_none(dev):
    """Pool memory has no legacy handle and a plain event no IPC handle: the driver's refusal, typed and named."""
    dev.bind()
    pooled = dev.alloc(256)
    with pytest.raises(DriverError) as info:
        cu.ipc.memory_handle(pooled.ptr)
    assert info.value.op == "cuIpcGetMemHandle" and info.value.code is not None
    plain = dev.create_event()
    with pytest.raises(DriverError) as info:
        cu.ipc.event_handle(plain)
    assert info.value.op == "cuIpcGetEventHandle" and info.value.code is not None
    direct = cu.DirectAllocator(dev)
    buf = direct.allocate(256)
    assert len(cu.ipc.memory_handle(buf.ptr)) == cu.ipc.HANDLE_SIZE
    for x in (pooled, plain, buf):
        x.close()


def test_event_recorded_in_child_is_waited_on_here(dev):
    n = 1 << 20
    pool = dev.create_driver_pool(ipc=True)
    buf = pool.allocate(n, "float32")
    buf.memset(0.0)
    event = cu.ipc.create_event(dev)
    proc, conn = start(ipc_children.record_after_work, cu.ipc.export(buf), cu.ipc.export(event), 9.0, 400_000_000)
    answer(proc, conn)  # the child queued a ~0.2 s kernel, then the fill, then recorded our event
    s = dev.create_stream()
    s.wait(event)
    out = np.empty(n, np.float32)
    buf.copy_to_host(out, stream=s)
    s.synchronize()
    conn.send("done")
    answer(proc, conn)
    finish(proc)
    np.testing.assert_array_equal(out, np.full(n, 9.0, np.float32))
    for x in (s, event, buf, pool):
        x.close()


def test_exporter_closing_first_leaves_the_importer_working(dev):
    pool = dev.create_driver_pool(ipc=True)
    buf = pool.allocate(1 << 16, "float32")
    buf.memset(1.0)
    proc, conn = start(ipc_children.outlive_exporter, cu.ipc.export(buf), 4.0)
    answer(proc, conn)
    buf.close()
    pool.close()
    dev.synchronize()
    conn.send("exporter closed")
    _, low, high = answer(proc, conn)  # the importer's writes, reads and close all succeeded
    finish(proc)
    assert low == high == 4.0


def test_descriptor_over_a_unix_socket(dev, ipc_pool):
    n = 4096
    buf = ipc_pool.allocate(n, "int32")
    buf.memset(0)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc, conn = start(ipc_children.over_socket, theirs, 11)
    theirs.close()
    cu.ipc.send(ours, cu.ipc.export(buf))
    ours.settimeout(TIMEOUT)
    assert cu.ipc.recv(ours) == ("filled", n)
    answer(proc, conn)
    finish(proc)
    ours.close()
    np.testing.assert_array_equal(buf.copy_to_host(), np.full(n, 11, np.int32))
    buf.close()


def test_descriptors_pickle(dev, ipc_pool):
    buf = ipc_pool.allocate(256, "float64")
    desc = cu.ipc.export(buf)
    again = pickle.loads(pickle.dumps(desc))
    assert (again.kind, again.size, again.dtype, again.offset, again.handle, again.device_uuid) == (
        desc.kind, desc.size, desc.dtype, desc.offset, desc.handle, desc.device_uuid)
    assert again.pool.key == desc.pool.key and again.pool._fd != desc.pool._fd  # a duplicate of the pool's fd
    again.pool.close()
    assert cu.ipc.export(ipc_pool) is desc.pool  # one shareable handle per pool
    event = cu.ipc.create_event(dev)
    edesc = cu.ipc.export(event)
    assert pickle.loads(pickle.dumps(edesc)) == edesc
    event.close()
    buf.close()


def test_opening_here_or_on_another_device_is_refused(dev, ipc_pool):
    buf = ipc_pool.allocate(64)
    desc = cu.ipc.export(buf)
    with pytest.raises(InvalidArgument, match="another process"):
        desc.open()
    with pytest.raises(InvalidArgument, match="another process"):
        desc.pool.open()
    event = cu.ipc.create_event(dev)
    with pytest.raises(InvalidArgument, match="another process"):
        cu.ipc.export(event).open()
    # in another process: a descriptor naming a device nobody has, and a garbage handle
    foreign = dataclasses.replace(desc, device_uuid="GPU-00000000-0000-0000-0000-000000000000")
    proc, conn = start(ipc_children.open_expecting, foreign)
    assert answer(proc, conn)[1:] == ("InvalidArgument", "cuMemPoolImportPointer")
    finish(proc)
    garbage = dataclasses.replace(desc, handle=bytes(64))
    proc, conn = start(ipc_children.open_expecting, garbage)
    name, op = answer(proc, conn)[1:]
    finish(proc)
    assert name in ("InvalidArgument", "DriverError") and op == "cuMemPoolImportPointer"
    event.close()
    buf.close()


def test_export_bad_input(dev):
    plain = dev.create_driver_pool()
    buf = plain.allocate(64)
    with pytest.raises(InvalidArgument, match="ipc=True"):
        cu.ipc.export(plain)
    with pytest.raises(InvalidArgument, match="stream-ordered"):
        cu.ipc.export(buf)  # pool memory without IPC: no legacy handle either
    default = dev.alloc(64)
    with pytest.raises(InvalidArgument, match="stream-ordered"):
        cu.ipc.export(default)
    ordinary = dev.create_event()
    with pytest.raises(InvalidArgument, match="ipc.create_event"):
        cu.ipc.export(ordinary)
    ordinary.close()
    with pytest.raises(ClosedError):
        cu.ipc.export(ordinary)
    default.close()
    with pytest.raises(ClosedError):
        cu.ipc.export(default)
    with pytest.raises(InvalidArgument):
        cu.ipc.export(np.zeros(4))
    with pytest.raises(InvalidArgument):
        cu.ipc.create_event(0)
    with pytest.raises(InvalidArgument):
        cu.ipc.send("not a socket", None)
    bad = cu.ipc.IpcBuffer("pool", dev.uuid, 1, 4, "uint8", 0, b"short")
    with pytest.raises(InvalidArgument, match="not a descriptor"):
        bad.open()
    with pytest.raises(InvalidArgument):
        cu.ipc.IpcEvent(dev.uuid, 1, b"x").open()
    ipc = dev.create_driver_pool(ipc=True)
    shared = cu.ipc.export(ipc)
    ipc.close()  # the pool's file descriptor goes with it
    with pytest.raises(ClosedError):
        pickle.dumps(shared)
    with pytest.raises((ClosedError, DriverError)):
        cu.ipc.export(ipc)
    buf.close()
    plain.close()


def test_recv_from_a_closed_socket_is_typed():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.close()
    with pytest.raises(InvalidState):
        cu.ipc.recv(ours)
    ours.close()
