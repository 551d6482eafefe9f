"""The cuda.core compat's IPC and graph memory on a device: what cuda.core's memory_ipc tests rely on, on ironaccel's.

IPC-enabled DeviceMemoryResources (an ironaccel DriverPool(ipc=True)) travel to spawned children as
their allocation handle, buffers as (resource, descriptor), events as their IPC handle; what the
children run is in compat_ipc_children.py.  Under the fake driver a pool's memory is a memfd both
processes map, so these run there too (graph memory nodes need a real driver).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle

import compat_ipc_children as children
import numpy as np
import pytest
from conftest import FAKE

pytestmark = pytest.mark.backend("cuda")

CTX = multiprocessing.get_context("spawn")
TIMEOUT = 120
NBYTES = 4096


@pytest.fixture
def ipc_mr(cc, device):
    mr = cc.DeviceMemoryResource(device, options=cc.DeviceMemoryResourceOptions(max_size=1 << 21, ipc_enabled=True))
    yield mr
    mr.close()


def run_child(target, *args, send=None):
    parent, child = CTX.Pipe()
    proc = CTX.Process(target=target, args=(*args, child))
    proc.start()
    child.close()
    if send is not None:
        parent.send(send)
    assert parent.poll(TIMEOUT), "the child did not answer in time"
    reply = parent.recv()
    proc.join(TIMEOUT)
    assert reply[0] != "error", reply[1]
    assert proc.exitcode == 0, f"child exit code {proc.exitcode}"
    return reply[1:]


def contents(buf):
    return buf._mem.copy_to_host()


def test_resource_and_buffer_sent_to_a_child_are_mapped_there(cc, device, ipc_mr):
    assert ipc_mr.is_ipc_enabled and not ipc_mr.is_mapped and ipc_mr.is_handle_owned
    handle = ipc_mr.allocation_handle
    assert handle is ipc_mr.allocation_handle and not handle.is_closed and int(handle) >= 0
    buf = ipc_mr.allocate(NBYTES, stream=device.default_stream)
    buf.fill(1, stream=device.default_stream)
    device.default_stream.sync()
    mr_mapped, buf_mapped, same_mr, size, uuid, refused = run_child(children.fill_sent_buffer, ipc_mr, buf, 9)
    assert mr_mapped and buf_mapped and same_mr and size == NBYTES and uuid == str(ipc_mr.uuid)
    assert refused == "Cannot allocate from a mapped IPC-enabled memory resource"
    np.testing.assert_array_equal(contents(buf), np.full(NBYTES, 9, np.uint8))  # the child's writes, seen here
    buf.close()


def test_a_child_closing_buffers_right_after_copies_into_them_loses_nothing(cc, device, ipc_mr):
    bufs = [ipc_mr.allocate(NBYTES, stream=device.default_stream) for _ in range(8)]
    for b in bufs:
        b.fill(0, stream=device.default_stream)
    device.default_stream.sync()
    run_child(children.copy_then_close, ipc_mr, bufs, 0x3C)
    for b in bufs:
        assert np.all(contents(b) == 0x3C)
        b.close()


@pytest.mark.parametrize("kind", ["device", pytest.param("pinned", marks=pytest.mark.skipif(
    FAKE, reason="the fake driver has no host-located IPC pools"))])
def test_one_descriptor_imported_twice_shares_one_mapping(cc, device, kind):
    """A pinned pool's pointer imported a second time failed with CUDA_ERROR_ALREADY_MAPPED (H200); its oversized
    descriptor was not refused (cuda.core's test_ipc_duplicate_import and test_errors, PinnedMR)."""
    if kind == "device":
        mr = cc.DeviceMemoryResource(device, options=cc.DeviceMemoryResourceOptions(max_size=1 << 21,
                                                                                    ipc_enabled=True))
    else:
        mr = cc.PinnedMemoryResource(options=cc.PinnedMemoryResourceOptions(max_size=1 << 21, ipc_enabled=True))
    buf = mr.allocate(NBYTES, stream=device.default_stream)
    other = mr.allocate(NBYTES, stream=device.default_stream)  # a second pointer of the pool (its address range
    desc = buf.ipc_descriptor  # came back as one not holding it in a child on the H200: cuda.core's PinnedMR tests)
    payload, _ = desc.__reduce__()[1]
    oversized = cc._memory.IPCBufferDescriptor._init(payload, NBYTES * 100)
    same, refused = run_child(children.import_twice, mr, desc, other.ipc_descriptor, oversized)
    assert same
    assert "exceeds mapped allocation extent" in refused
    buf.close()
    other.close()
    mr.close()


def test_descriptors_claiming_too_much_are_refused(cc, device, ipc_mr):
    buf = ipc_mr.allocate(NBYTES, stream=device.default_stream)
    desc = buf.ipc_descriptor
    payload, size = desc.__reduce__()[1]
    assert size == NBYTES and len(payload) == 64
    assert pickle.loads(pickle.dumps(desc)).size == NBYTES
    oversized = cc._memory.IPCBufferDescriptor._init(payload, 1 << 22)  # past the pool's 2 MiB
    truncated = cc._memory.IPCBufferDescriptor._init(payload[:8], NBYTES)
    with pytest.raises(ValueError, match="payload is 8 bytes; expected at least 64"):
        cc.Buffer.from_ipc_descriptor(ipc_mr, truncated, stream=device.default_stream)
    with pytest.raises(TypeError, match="Argument 'ipc_descriptor' has incorrect type"):
        cc.Buffer.from_ipc_descriptor(ipc_mr, buf, stream=device.default_stream)
    too_big, too_short = run_child(children.import_checked, ipc_mr.allocation_handle, oversized, truncated)
    assert "exceeds mapped allocation extent" in too_big
    assert "expected at least 64" in too_short
    buf.close()


def test_a_buffer_asks_the_driver_for_its_export_data_once(cc, device, ipc_mr, monkeypatch):
    """buf.ipc_descriptor uses the export data ironaccel keeps for the allocation (cuda.core keeps it on the
    Buffer): cuMemPoolExportPointer is called once however often it is asked, and not for a closed buffer."""
    import ironaccel_cuda.ipc as ia_ipc
    from ironaccel_cuda_compat.cuda_core import _ia

    asked = []
    for module in (ia_ipc, _ia):
        real = module.call
        monkeypatch.setattr(module, "call", lambda name, *a, _real=real, **k: (asked.append(name), _real(name, *a,
                                                                                                    **k))[1])
    buf = ipc_mr.allocate(NBYTES, stream=device.default_stream)
    first, second = buf.ipc_descriptor, buf.get_ipc_descriptor()
    assert asked.count("cuMemPoolExportPointer") == 1
    assert first.__reduce__()[1] == second.__reduce__()[1] and first.size == NBYTES
    other = ipc_mr.allocate(NBYTES, stream=device.default_stream)
    assert other.ipc_descriptor.__reduce__()[1][0] != first.__reduce__()[1][0]
    assert asked.count("cuMemPoolExportPointer") == 2
    buf.close()
    with pytest.raises(RuntimeError, match="closed"):
        _ = buf.ipc_descriptor
    other.close()


def test_plainly_pickled_buffer_needs_its_resource_registered(cc, device, ipc_mr):
    buf = ipc_mr.allocate(NBYTES, stream=device.default_stream)
    pickled = pickle.dumps(buf)  # the resource travels as its UUID only
    before, same = run_child(children.unpickle_before_and_after_registering, ipc_mr.allocation_handle, pickled, 5)
    assert before == f"Memory resource {ipc_mr.uuid} was not found"
    assert same
    np.testing.assert_array_equal(contents(buf), np.full(NBYTES, 5, np.uint8))
    buf.close()
    with pytest.raises(TypeError, match="multiprocessing"):
        pickle.dumps(ipc_mr.allocation_handle)
    plain = cc.DeviceMemoryResource(device)
    with pytest.raises(RuntimeError, match="not IPC-enabled"):
        _ = plain.allocate(16, stream=device.default_stream).ipc_descriptor


def test_ipc_event_travels_with_its_properties(cc, device):
    s = device.create_stream()
    with pytest.raises(TypeError, match="must be bound"):
        device.create_event({"ipc_enabled": True})
    with pytest.raises(TypeError, match="cannot use timing"):
        s.record(options={"ipc_enabled": True, "timing_enabled": True})
    e = s.record(options=cc.EventOptions(ipc_enabled=True, blocking_sync=True))
    with pytest.raises(TypeError, match="should not be re-recorded"):
        s.record(e)
    desc, ipc, timing, blocking, dev, ctx = run_child(children.report_event, send=e)
    assert desc == e.ipc_descriptor and ipc and not timing and blocking and dev is None and ctx is None
    s.sync()
    e.close()
    s.close()


def test_an_ipc_event_pickles_on_a_thread_without_a_context(cc, device):
    """multiprocessing.Queue pickles on its feeder thread, where no context is current (cuIpcGetEventHandle failed
    there with CUDA_ERROR_INVALID_CONTEXT in cuda.core's test_event_ipc on the H200)."""
    import pickle
    import threading

    s = device.create_stream()
    e = s.record(options=cc.EventOptions(ipc_enabled=True))
    out: list[object] = []
    t = threading.Thread(target=lambda: out.append(pickle.dumps(e)))
    t.start()
    t.join()
    assert len(out) == 1 and isinstance(out[0], bytes)
    s.sync()
    e.close()
    s.close()


@contextlib.contextmanager
def _capture(device, mode):
    """A GraphBuilder capturing in `mode`; if the body fails, the capture is ended, so that a capture left open in
    this thread (thread_local, global) cannot fail every later test's driver calls."""
    gb = device.create_graph_builder().begin_building(mode)
    try:
        yield gb
    except BaseException:
        with contextlib.suppress(Exception):
            gb.end_building()
        raise


@pytest.mark.skipif(FAKE, reason="the fake driver records no memory nodes in stream capture")
def test_graph_memory_resource_allocates_inside_capture_only(cc, device):
    gmr = cc.GraphMemoryResource(device)
    assert gmr is cc.GraphMemoryResource(0) and gmr.device_id == 0 and gmr.is_device_accessible
    s = device.create_stream()
    with pytest.raises(RuntimeError, match="non-capturing stream"):
        gmr.allocate(64, stream=s)
    dmr = cc.DeviceMemoryResource(device)
    out = dmr.allocate(NBYTES, stream=s)
    out.fill(0, stream=s)
    with _capture(device, "thread_local") as gb:
        with pytest.raises(RuntimeError, match="capturing stream"):
            dmr.allocate(64, stream=gb)
        tmp = gmr.allocate(NBYTES, stream=gb)
        tmp.fill(4, stream=gb)
        out.copy_from(tmp, stream=gb)
        tmp.close()  # during capture: the graph's free node
    graph = gb.end_building().complete()
    graph.upload(s)
    graph.launch(s)
    s.sync()
    np.testing.assert_array_equal(out._mem.copy_to_host(), np.full(NBYTES, 4, np.uint8))
    attrs = gmr.attributes
    assert attrs.reserved_mem_current >= NBYTES and attrs.used_mem_high >= NBYTES
    with pytest.raises(AttributeError, match="is not writable"):
        attrs.used_mem_current = 0
    with pytest.raises(AttributeError, match="may only be set to zero"):
        attrs.used_mem_high = 1
    attrs.used_mem_high = 0
    assert "reserved_mem_high=" in repr(attrs)
    graph.close()
    gmr.trim()
    out.close()
    s.close()


@pytest.mark.skipif(FAKE, reason="the fake driver records no memory nodes in stream capture")
def test_graph_memory_kept_past_a_launch_is_freed_by_the_next_with_auto_free(cc, device):
    gmr = cc.GraphMemoryResource(device)
    s = device.create_stream()
    with _capture(device, "relaxed") as gb:
        out = gmr.allocate(NBYTES, stream=gb)  # not freed in the graph: it outlives each launch
        out.fill(6, stream=gb)
    graph = gb.end_building().complete(cc.graph.GraphCompleteOptions(auto_free_on_launch=True))
    seen = cc.DeviceMemoryResource(device).allocate(NBYTES, stream=s)
    for _ in range(2):  # without the flag the second launch fails: the first launch's allocation is still live
        seen.fill(0, stream=s)
        graph.launch(s)
        seen.copy_from(out, stream=s)
        s.sync()
        np.testing.assert_array_equal(seen._mem.copy_to_host(), np.full(NBYTES, 6, np.uint8))
    seen.close()
    graph.close()
    s.close()

