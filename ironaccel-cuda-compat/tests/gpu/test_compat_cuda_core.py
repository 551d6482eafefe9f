"""ironaccel_cuda_compat.cuda_core on a device: cuda.core's API, on ironaccel's own objects and hot methods.

cuda.core's own test suite runs through ironaccel-cuda-compat/tools/run_cuda_core_tests.py; these are the
compat's own checks (identity of the hot methods with ironaccel's, results of real work, the
differences the coverage map states).
"""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from conftest import FAKE
from helpers.kernels import NAME_EXPRESSIONS, SOURCE

import ironaccel_cuda as cu
from ironaccel import Unsupported

pytestmark = pytest.mark.backend("cuda")

N = 64


@pytest.fixture
def module(cc, device):
    program = cc.Program(SOURCE, "c++", cc.ProgramOptions(std="c++17"))
    return program.compile("cubin", name_expressions=tuple(NAME_EXPRESSIONS))


def pinned_array(cc, n, dtype=np.float32):
    buf = cc.LegacyPinnedMemoryResource().allocate(n * np.dtype(dtype).itemsize)
    return buf, np.from_dlpack(buf).view(dtype)


def test_device_is_a_per_thread_ironaccel_device(cc):
    d = cc.Device(0)
    assert d is cc.Device(0) and d is cc.Device(d)
    assert isinstance(d, cu.Device)
    other = []
    t = threading.Thread(target=lambda: other.append(cc.Device(0)))
    t.start()
    t.join()
    assert other[0] is not d and other[0] == d and hash(other[0]) == hash(d)
    assert not d.uuid.startswith("GPU-") and cu.Device(0).uuid == "GPU-" + d.uuid
    major, minor = cu.Device(0).compute_capability
    assert d.compute_capability == (major, minor) and d.compute_capability.major == major
    assert d.arch == f"{major}{minor}"
    assert d.properties.multiprocessor_count == cu.Device(0).attributes.multiprocessor_count
    assert d.properties is d.properties
    assert d.properties.warp_size == cu.device_attribute(0, "warp_size") == 32
    assert d.properties.unified_addressing is True
    if FAKE:  # an attribute this driver does not answer reads as 0, as in cuda.core
        assert d.properties.clock_rate == 0 and d.properties.mps_enabled is False
    assert d.device_id == int(d) == 0
    with pytest.raises(RuntimeError, match="cannot be instantiated directly"):
        cc._device.DeviceProperties()
    with pytest.raises(ValueError, match="device_id must be within"):
        cc.Device(cu.device_count())


def test_set_current_comes_first_on_a_new_thread(cc):
    from ironaccel_cuda_compat.cuda_core._utils.cuda_utils import CUDAError

    seen: list[object] = []

    def work():
        d = cc.Device(0)
        seen.append(cu.current_context_handle())  # making the Device made no context current
        try:
            d.create_stream()
        except CUDAError as exc:
            seen.append(exc)
        d.set_current()
        s = d.create_stream()
        s.sync()
        seen.append(d.context == s.context)
        s.close()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen[0] == 0
    assert isinstance(seen[1], CUDAError) and "set_current" in str(seen[1])
    assert seen[2] is True


def test_stream_is_an_ironaccel_stream_with_its_sync(cc, device):
    from cuda.bindings import driver

    assert cc.Stream.sync is cu.Stream.synchronize
    s = device.create_stream(options=cc.StreamOptions(nonblocking=True, priority=-1))
    assert isinstance(s, cu.Stream) and s.is_nonblocking and s.priority == -1
    assert isinstance(s.handle, driver.CUstream) and int(s.handle) == s.__cuda_stream__()[1]
    assert cc.Stream.from_handle(int(s.handle)) == s and hash(cc.Stream.from_handle(int(s.handle))) == hash(s)
    assert cc.Stream.from_handle(int(s.handle)).device is device
    foreign = cc.Stream.from_handle(int(s.handle))  # priority and flags are the driver's to say
    assert foreign.priority == -1 and foreign.is_nonblocking
    blocking = cu.Device(0).create_stream(non_blocking=False)
    wrapped = cc.Stream.from_handle(blocking.handle)
    assert not wrapped.is_nonblocking and wrapped.priority == 0
    blocking.close()
    assert cc.LEGACY_DEFAULT_STREAM.priority == 0 and not cc.LEGACY_DEFAULT_STREAM.is_nonblocking
    buf = device.alloc(N, "float32", stream=s)  # ironaccel's own API takes the compat stream
    buf.copy_from(np.arange(N, dtype=np.float32), stream=s)
    s.sync()
    np.testing.assert_array_equal(buf.copy_to_host(), np.arange(N, dtype=np.float32))
    buf.close()
    low, high = (int(v) for v in driver.cuCtxGetStreamPriorityRange()[1:])
    with pytest.raises(ValueError, match="out of range"):
        device.create_stream(options=cc.StreamOptions(priority=low + 1))
    with pytest.raises(RuntimeError, match="cannot be instantiated directly"):
        cc.Stream()
    s.close()
    assert s.is_closed
    s.close()


@pytest.mark.multi_gpu
def test_a_foreign_stream_opens_only_its_own_device():
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import ironaccel_cuda as cu
        from ironaccel_cuda import _devices
        from ironaccel_cuda_compat import cuda_core as cc
        s = cu.Device(1).create_stream()
        assert cc.Stream.from_handle(s.handle).device.ordinal == 1
        print(sorted(_devices.states))
    """)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[1]", "Stream.from_handle opened other devices to find the stream's"


def test_default_streams_follow_the_current_context(cc, device):
    legacy, per_thread = cc.LEGACY_DEFAULT_STREAM, cc.PER_THREAD_DEFAULT_STREAM
    assert int(legacy.handle) == 1 and int(per_thread.handle) == 2 and legacy != per_thread
    assert legacy.device is device and device.default_stream is legacy
    legacy.sync()
    buf = device.allocate(256, stream=legacy)
    buf.fill(3, stream=legacy)
    host, view = pinned_array(cc, 256, np.uint8)
    buf.copy_to(host, stream=legacy)
    legacy.sync()
    assert (view == 3).all()
    buf.close(legacy)
    host.close()


def test_events_time_and_explain_misuse(cc, device, stream, module):
    assert cc.Event.sync is cu.Event.synchronize
    timed = cc.EventOptions(timing_enabled=True)
    e1 = stream.record(options=timed)
    buf = device.allocate(N * 4, stream=stream)
    buf.fill(0, stream=stream)
    e2 = stream.record(options=timed)
    e2.sync()
    assert e2.is_done and isinstance(e2 - e1, float) and e2 - e1 >= 0
    untimed = stream.record()
    untimed.sync()
    assert isinstance(untimed, cu.Event) and not untimed.is_timing_enabled
    with pytest.raises(RuntimeError, match="^Both Events must be created with timing enabled"):
        untimed - e1
    never = device.create_event(timed)
    with pytest.raises(RuntimeError, match="^Both Events must be recorded"):
        never - e1
    blocking = device.create_event(cc.EventOptions(blocking_sync=True))
    assert blocking.is_blocking_sync and not e1.is_blocking_sync
    with pytest.raises(RuntimeError, match="not IPC-enabled"):
        _ = e1.ipc_descriptor
    assert e1 != e2 and e1 == e1 and e2.device is device
    from ironaccel_cuda import _core  # create_event and record with an event are compiled; the rest is Python

    assert type(device).create_event is _core.compat_create_event and type(stream).record is _core.compat_stream_record
    assert device.create_event()._flags == 2 and blocking._flags == 3 and never._flags == 0  # cuEventCreate flags
    assert stream.record(blocking) is blocking and blocking.sync() is None and blocking.is_done
    with pytest.raises(Exception, match="expected an Event"):
        stream.record(object())
    other = device.create_stream()
    other.close()
    with pytest.raises(Exception, match="closed"):
        other.record(blocking)  # a closed stream: the cold path's error
    for e in (e1, e2, untimed, never, blocking):
        e.close()
        e.close()
    assert e1.is_closed
    buf.close(stream)


def test_buffers_copy_fill_and_free_through_ironaccel(cc, device, stream):
    x = np.arange(N, dtype=np.float32)
    host, view = pinned_array(cc, N)
    view[:] = x
    dbuf = device.allocate(N * 4, stream=stream)
    assert isinstance(dbuf._mem, cu.memory.DeviceBuf) and dbuf.handle == dbuf._mem.ptr
    assert dbuf.device_id == 0 and dbuf.is_device_accessible and not dbuf.is_host_accessible
    dbuf.copy_from(host, stream=stream)
    copy = dbuf.copy_to(stream=stream)  # a new buffer of the same resource
    view[:] = 0
    copy.copy_to(host, stream=stream)
    stream.sync()
    np.testing.assert_array_equal(view, x)
    copy.fill(np.uint32(0x3F800000), stream=stream)  # 1.0f as a 4-byte pattern
    copy.copy_to(host, stream=stream)
    stream.sync()
    np.testing.assert_array_equal(view, np.ones(N, np.float32))
    with pytest.raises(ValueError, match="sizes mismatch"):
        dbuf.copy_from(device.allocate(8, stream=stream), stream=stream)
    with pytest.raises(OverflowError):
        dbuf.fill(256, stream=stream)
    with pytest.raises(TypeError, match="stream is required"):
        dbuf.fill(0, stream=None)
    other = device.create_stream()
    copy.close(other)  # freed after the work on `other`, on its allocation stream
    assert copy.handle == 0 and copy.memory_resource is None
    copy.close()
    dbuf.close(stream)
    empty = device.allocate(0, stream=stream)
    assert empty.size == 0 and empty.handle == 0
    host.close()
    other.close()


def test_compiled_buffer_paths_agree_with_the_cold_ones(cc, device, stream):
    """Device/DeviceMemoryResource.allocate, Buffer.close and the pool <-> page-locked copies are compiled
    (_core.CompatBuffer); what they do not take goes to the Python paths, with the same results and errors."""
    from ironaccel_cuda import _core
    from ironaccel_cuda_compat.cuda_core._utils.cuda_utils import CUDAError

    assert cc.Buffer.close is _core.CompatBuffer.close and cc.Buffer.copy_from is _core.CompatBuffer.copy_from
    mr = device.memory_resource
    assert type(mr).allocate is _core.compat_dmr_allocate
    before = mr.attributes.used_mem_current
    fast = device.allocate(4096, stream=stream)
    cold = mr.allocate(4096, stream=cc.LEGACY_DEFAULT_STREAM)  # a default stream: the cold path
    for b in (fast, cold):
        assert type(b) is cc.Buffer and b.size == 4096 and b.memory_resource is mr and b.handle == b._mem.ptr
    assert fast._stream is stream and mr.attributes.used_mem_current >= before + 8192
    x = np.arange(1024, dtype=np.float32)
    host, view = pinned_array(cc, 1024)
    view[:] = x
    fast.copy_from(host, stream=stream)  # h2d
    cold.copy_from(fast, stream=stream)  # d2d
    view[:] = 0
    assert cold.copy_to(host, stream=stream) is host  # d2h
    stream.sync()
    np.testing.assert_array_equal(view, x)
    with pytest.raises(ValueError, match="sizes mismatch"):
        fast.copy_from(device.allocate(8, stream=stream), stream=stream)
    with pytest.raises(TypeError, match="src must be a Buffer"):
        fast.copy_from(view, stream=stream)
    with pytest.raises(TypeError, match="stream is required"):
        fast.copy_from(host, stream=None)
    for size in (-1, True, 1.5):  # refused as before the compiled path (cuda.core's own error types)
        with pytest.raises((ValueError, TypeError, CUDAError)):
            device.allocate(size, stream=stream)
    with pytest.raises(CUDAError, match="^CUDA_ERROR_OUT_OF_MEMORY: out of memory"):  # a driver failure, as
        device.allocate(cu.Device(0).total_memory, stream=stream)  # cuda.core's error: the whole device is too much
    from ironaccel import DriverError
    from ironaccel_cuda_compat.cuda_core._utils.cuda_utils import from_ironaccel

    assert str(from_ironaccel(DriverError("cuda", "cuX", 99999, "x", None))) == "UNEXPECTED ERROR CODE: 99999"
    fast.close()
    fast.close()  # idempotent
    assert fast.is_closed and fast.handle == 0
    cold.close(stream)
    dropped = device.allocate(4096, stream=stream)
    del dropped  # freed by the compiled finalizer
    gc.collect()
    stream.sync()
    assert mr.attributes.used_mem_current == before
    host.close()


def test_foreign_buffers_free_through_their_resource(cc, device, stream):
    from cuda.bindings import driver

    class Tracking(cc.MemoryResource):
        def __init__(self):
            self.live = {}

        def allocate(self, size, *, stream=None):
            ptr = int(driver.cuMemAlloc(size)[1])
            self.live[ptr] = size
            return cc.Buffer.from_handle(ptr, size, mr=self)

        def deallocate(self, ptr, size, *, stream=None):
            assert driver.cuMemFree(ptr)[0] == 0
            del self.live[int(ptr)]

        is_device_accessible = property(lambda self: True)
        is_host_accessible = property(lambda self: False)
        device_id = property(lambda self: 0)

    mr = Tracking()
    b = mr.allocate(256)
    b.close()
    assert not mr.live
    b = mr.allocate(256)
    del b
    gc.collect()
    assert not mr.live
    with pytest.raises(TypeError):
        cc.MemoryResource()
    a = (ctypes.c_byte * 16)()
    h = cc.Buffer.from_handle(ctypes.addressof(a), 16, owner=a)
    assert h.is_host_accessible and not h.is_device_accessible and h.device_id == -1 and h.owner is a
    h.close()
    dev_mem, host_mem = cu.Device(0).alloc(64), cu.Device(0).alloc_pinned(64)  # what the driver says of each
    d = cc.Buffer.from_handle(dev_mem.ptr, 64, owner=dev_mem)
    assert d.is_device_accessible and not d.is_host_accessible and d.device_id == 0
    p = cc.Buffer.from_handle(host_mem.array.ctypes.data, 64, owner=host_mem)
    assert p.is_device_accessible and p.is_host_accessible
    for b in (d, p, dev_mem, host_mem):
        b.close()
    with pytest.raises(ValueError, match="both specified"):
        cc.Buffer.from_handle(ctypes.addressof(a), 16, mr=mr, owner=a)


def test_program_kernel_and_launch(cc, device, stream, module):
    saxpy = module.get_kernel("saxpy")
    assert isinstance(saxpy._fn, cu.Function) and saxpy.num_arguments == 4
    assert [(p.offset, p.size) for p in saxpy.arguments_info] == [(0, 4), (8, 8), (16, 8), (24, 4)]
    assert saxpy.attributes.max_threads_per_block > 0
    assert saxpy.attributes[device].num_regs == saxpy.attributes.num_regs
    assert "templated::saxpy<float>" in module.symbol_mapping
    templated = module.get_kernel("templated::saxpy<float>")
    x = np.arange(N, dtype=np.float32)
    host, view = pinned_array(cc, N)
    view[:] = x
    dx, dy = device.allocate(N * 4, stream=stream), device.allocate(N * 4, stream=stream)
    dx.copy_from(host, stream=stream)
    dy.fill(0, stream=stream)
    config = cc.LaunchConfig(grid=(N + 31) // 32, block=32)
    cc.launch(stream, config, saxpy, np.float32(2), dx, dy, np.uint32(N))  # y = 2x
    cc.launch(stream, config, templated, ctypes.c_float(1.0), dx, dy, N)  # y += x: ctypes and int converted
    cc.launch(stream, config, saxpy, 0.5, dx.handle, dy, np.uint32(N))  # float -> float, int address
    dy.copy_to(host, stream=stream)
    stream.sync()
    np.testing.assert_allclose(view, 3.5 * x)
    assert cc.Kernel.from_handle(int(saxpy.handle)) == saxpy
    with pytest.raises(TypeError):
        cc.Kernel.from_handle("not a handle")
    with pytest.raises(TypeError):
        cc.launch(stream, None, saxpy)
    with pytest.raises(TypeError):
        cc.launch(None, config, saxpy)
    with pytest.raises(TypeError, match="unsupported type"):
        cc.launch(stream, config, saxpy, "a", dx, dy, np.uint32(N))
    for b in (dx, dy):
        b.close(stream)
    host.close()


def test_cooperative_and_cluster_launches_use_ironaccels_launch_config(cc, device, stream, module):
    saxpy = module.get_kernel("saxpy")
    n = 4 * 16
    x = np.arange(n, dtype=np.float32)
    host, view = pinned_array(cc, n)
    view[:] = x
    dx, dy = device.allocate(n * 4, stream=stream), device.allocate(n * 4, stream=stream)
    dx.copy_from(host, stream=stream)
    dy.fill(0, stream=stream)
    cc.launch(stream, cc.LaunchConfig(grid=4, block=16, is_cooperative=True), saxpy, np.float32(1), dx, dy,
              np.uint32(n))
    cc.launch(stream, cc.LaunchConfig(grid=2, cluster=2, block=16), saxpy, np.float32(1), dx, dy, np.uint32(n))
    dy.copy_to(host, stream=stream)
    stream.sync()
    np.testing.assert_allclose(view, 2 * x)
    with pytest.raises(ValueError, match="exceeds the limit"):
        cc.launch(stream, cc.LaunchConfig(grid=5000, block=16, is_cooperative=True), saxpy, np.float32(1), dx, dy,
                  np.uint32(n))
    for b in (dx, dy):
        b.close(stream)
    host.close()


def test_graph_builder_captures_and_updates(cc, device, stream, module):
    saxpy = module.get_kernel("saxpy")
    x = np.arange(N, dtype=np.float32)
    host, view = pinned_array(cc, N)
    view[:] = x
    dx, dy, dz = (device.allocate(N * 4, stream=stream) for _ in range(3))
    dx.copy_from(host, stream=stream)
    dy.fill(0, stream=stream)
    dz.fill(0, stream=stream)
    stream.sync()
    config = cc.LaunchConfig(grid=(N + 31) // 32, block=32)

    def build(out):
        gb = device.create_graph_builder()
        assert not gb.is_building
        gb.begin_building()
        with pytest.raises(RuntimeError, match="already building"):
            gb.begin_building()
        cc.launch(gb, config, saxpy, np.float32(1), dx, out, np.uint32(N))
        cc.launch(gb, config, saxpy, np.float32(1), dx, out, np.uint32(N))
        return gb.end_building()

    gb = build(dy)
    with pytest.raises(RuntimeError, match="Cannot resume"):
        gb.begin_building()
    graph = gb.complete()
    graph.upload(stream)
    graph.upload(cc.LEGACY_DEFAULT_STREAM)  # a default stream: the current context's
    graph.launch(stream)
    graph.launch(stream)
    graph.update(build(dz))  # same topology, writes dz now
    graph.launch(stream)
    dy.copy_to(host, stream=stream)
    stream.sync()
    np.testing.assert_allclose(view, 4 * x)
    dz.copy_to(host, stream=stream)
    stream.sync()
    np.testing.assert_allclose(view, 2 * x)
    graph.close()
    graph.close()
    assert int(graph.handle) == 0
    gb.close()
    with pytest.raises(RuntimeError, match="has not finished building"):
        device.create_graph_builder().complete()
    for b in (dx, dy, dz):
        b.close(stream)
    host.close()


@pytest.mark.skipif(FAKE, reason="the fake driver captures each stream alone: forks of a capture need a GPU")
def test_graph_builder_split_and_join(cc, device, stream, module):
    saxpy = module.get_kernel("saxpy")
    x = np.arange(N, dtype=np.float32)
    host, view = pinned_array(cc, N)
    view[:] = x
    dx, dy, scratch = (device.allocate(N * 4, stream=stream) for _ in range(3))
    dx.copy_from(host, stream=stream)
    dy.fill(0, stream=stream)
    stream.sync()
    config = cc.LaunchConfig(grid=(N + 31) // 32, block=32)
    gb = device.create_graph_builder().begin_building()
    left, right = gb.split(2)
    assert left is gb and right.is_join_required and not left.is_join_required
    cc.launch(left, config, saxpy, np.float32(1), dx, dy, np.uint32(N))
    cc.launch(right, config, saxpy, np.float32(1), dx, scratch, np.uint32(N))
    joined = cc.graph.GraphBuilder.join(left, right)
    assert joined is gb and right.is_closed
    cc.launch(joined, config, saxpy, np.float32(1), dx, dy, np.uint32(N))
    graph = joined.end_building().complete()
    graph.launch(stream)
    dy.copy_to(host, stream=stream)
    stream.sync()
    np.testing.assert_allclose(view, 2 * x)
    graph.close()
    gb.close()
    for b in (dx, dy, scratch):
        b.close(stream)
    host.close()


def test_missing_parts_say_what_they_wait_for(cc, device, stream):
    with pytest.raises(Unsupported, match="out of the compat's scope"):
        device.create_texture_object(None)
