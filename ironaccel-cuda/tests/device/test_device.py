"""Device: open, identity, attributes, descriptor, peers, synchronize, threads, bad ordinals, close."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from helpers import FAKE

import ironaccel
import ironaccel_cuda as cu
from ironaccel import CapabilityFlags, ClosedError, ComputeTier, DeviceDescriptor, InvalidArgument, InvalidState

pytestmark = pytest.mark.backend("cuda")


def test_open_by_ordinal_and_through_registry():
    a = cu.Device(0)
    b = ironaccel.open("cuda", 0)
    assert isinstance(b, cu.Device)
    assert a.ordinal == b.ordinal == 0
    assert a is not b  # separate handles over one shared context
    assert a.default_stream is b.default_stream
    a.close()
    b.close()


def test_identity(dev):
    assert dev.name and isinstance(dev.name, str)
    assert re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", dev.uuid)
    assert re.fullmatch(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]", dev.pci_bus_id)
    major, minor = dev.compute_capability
    assert major >= 3 and minor >= 0
    assert dev.arch == f"sm_{major}{minor}"


def test_memory_info(dev):
    free, total = dev.memory_info()
    assert 0 < free <= total == dev.total_memory
    dev.bind()
    free, total = cu.current_device_memory_info()  # the same device, through the current context
    assert 0 < free <= total == dev.total_memory
    seen = []

    def no_context():
        try:
            cu.current_device_memory_info()
        except InvalidState as exc:
            seen.append(exc.code)

    t = threading.Thread(target=no_context)
    t.start()
    t.join()
    assert seen == [201]  # CUDA_ERROR_INVALID_CONTEXT
    buf = dev.alloc(64 << 20)
    dev.synchronize()
    used, _reserved = dev.pool_usage()
    assert used >= 64 << 20
    buf.close()


def test_attributes(dev):
    a = dev.attributes
    assert a.multiprocessor_count > 0
    assert a.max_threads_per_block >= 512
    assert a.max_shared_memory_per_block >= 48 * 1024
    assert a.max_shared_memory_per_multiprocessor >= a.max_shared_memory_per_block
    assert a.warp_size == 32
    assert a.async_engine_count >= 1
    assert a.unified_addressing is True
    assert isinstance(a.memory_pools_supported, bool)
    assert a.compute_capability == dev.compute_capability
    assert len(a.max_grid_dim) == 3 and a.max_grid_dim[0] >= 2**31 - 1
    assert a.to_dict()["warp_size"] == 32


def test_descriptor(dev):
    d = dev.descriptor
    assert isinstance(d, DeviceDescriptor)
    assert d.backend == "cuda" and d.ordinal == 0 and d.name == dev.name
    assert d.vendor is ironaccel.Vendor.NVIDIA
    assert d.memory_bytes == dev.total_memory
    assert CapabilityFlags.GRAPHS in d.capabilities and CapabilityFlags.RUNTIME_COMPILE in d.capabilities
    assert (CapabilityFlags.MEMORY_POOLS in d.capabilities) == dev.attributes.memory_pools_supported
    if "H200" in dev.name or "H100" in dev.name:
        assert d.compute_tier is ComputeTier.DATACENTER
        assert CapabilityFlags.BF16 in d.capabilities and CapabilityFlags.MATRIX_UNITS in d.capabilities
    assert d.extras["arch"] == dev.arch
    d.to_dict()


def test_enumerate_all():
    count = cu.device_count()
    descs = cu.devices()
    assert len(descs) == count >= 1
    assert [d.ordinal for d in descs] == list(range(count))
    assert ironaccel.devices("cuda") == descs
    assert len({d.extras["uuid"] for d in descs}) == count


def test_queries_by_ordinal_match_the_device(dev):
    """device_name, device_attribute, ...: what a Device reports, asked by ordinal."""
    from ironaccel_cuda._driver import driver

    warp = driver().CUdevice_attribute.CU_DEVICE_ATTRIBUTE_WARP_SIZE
    assert cu.device_name(0) == dev.name and cu.device_pci_bus_id(0) == dev.pci_bus_id
    assert cu.device_total_memory(0) == dev.total_memory
    assert cu.device_attribute(0, "warp_size") == cu.device_attribute(0, warp) == 32
    assert cu.device_attribute(0, int(warp)) == 32
    assert cu.device_attribute(np.int64(0), "MULTIPROCESSOR_COUNT") == dev.attributes.multiprocessor_count
    assert cu.device_ordinal(0) == 0 and cu.device_ordinal(dev.pci_bus_id) == 0
    count = cu.device_count()
    assert cu.device_ordinal(count - 1) == count - 1
    for other in range(count):
        expected = dev.can_access_peer(other) if other else cu.can_access_peer(0, 0)
        assert cu.can_access_peer(0, other) is expected
    version = cu.driver_version()
    assert version >= 11000 and version % 10 == 0


def test_queries_by_ordinal_refuse_bad_input():
    count = cu.device_count()
    for query, op in ((cu.device_ordinal, "cuDeviceGet"), (cu.device_name, "cuDeviceGetName"),
                      (cu.device_pci_bus_id, "cuDeviceGetPCIBusId"), (cu.device_total_memory, "cuDeviceTotalMem")):
        with pytest.raises(InvalidArgument) as info:
            query(count)  # the driver's CUDA_ERROR_INVALID_DEVICE
        assert info.value.op == op and info.value.code == 101
        for bad in (1.5, True, None, 1 << 40):
            with pytest.raises(InvalidArgument) as info:
                query(bad)
            assert info.value.op == op and info.value.code is None
    with pytest.raises(InvalidArgument) as info:
        cu.device_ordinal("not a bus id")
    assert info.value.op == "cuDeviceGetByPCIBusId" and info.value.code is not None
    with pytest.raises(InvalidArgument) as info:
        cu.device_attribute(count, "warp_size")
    assert info.value.op == "cuDeviceGetAttribute" and info.value.code == 101
    for bad in ("no_such_attribute", 1 << 20, 2.0, None):
        with pytest.raises(InvalidArgument) as info:
            cu.device_attribute(0, bad)
        assert info.value.op == "cuDeviceGetAttribute" and info.value.code is None
    with pytest.raises(InvalidArgument, match="did you mean warp_size"):
        cu.device_attribute(0, "warp_sise")
    with pytest.raises(InvalidArgument) as info:
        cu.can_access_peer(0, count)
    assert info.value.op == "cuDeviceCanAccessPeer" and info.value.code == 101


def test_queries_by_ordinal_open_no_context():
    """Unlike Device(i), the queries leave the thread without a current context and retain no primary context."""
    script = textwrap.dedent("""
        import ironaccel_cuda as cu
        from ironaccel_cuda import _devices
        from ironaccel_cuda._driver import call
        cu.device_name(0); cu.device_pci_bus_id(0); cu.device_total_memory(0); cu.device_ordinal(0)
        cu.device_attribute(0, "warp_size"); cu.can_access_peer(0, 0); cu.driver_version()
        print("CURRENT", int(call("cuCtxGetCurrent") or 0), "STATES", len(_devices.states))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "CURRENT 0 STATES 0" in out.stdout, out.stdout


def test_graph_memory_counters(dev):
    """graph_memory / reset_graph_memory_high / trim_graph_memory: the device's graph-memory counters."""
    names = ("used_mem_current", "used_mem_high", "reserved_mem_current", "reserved_mem_high")
    assert all(isinstance(dev.graph_memory(n), int) and dev.graph_memory(n) >= 0 for n in names)
    assert dev.graph_memory("used_mem_high") >= dev.graph_memory("used_mem_current")
    assert dev.graph_memory("reserved_mem_high") >= dev.graph_memory("reserved_mem_current")
    if not FAKE:  # the fake driver makes no graph memory
        g = cu.Graph(dev)
        node = g.add_alloc(1 << 20)
        g.add_free(node, after=node)
        exe = g.instantiate()
        s = dev.create_stream()
        exe.launch(s)
        s.synchronize()
        assert dev.graph_memory("used_mem_high") >= 1 << 20 and dev.graph_memory("reserved_mem_high") >= 1 << 20
        for x in (exe, g, s):
            x.close()
    for high in ("used_mem_high", "reserved_mem_high"):
        dev.reset_graph_memory_high(high)
    assert dev.graph_memory("used_mem_high") == dev.graph_memory("used_mem_current")
    dev.trim_graph_memory()
    for bad in ("USED_MEM_CURRENT", "free", None):
        with pytest.raises(InvalidArgument) as info:
            dev.graph_memory(bad)
        assert info.value.op == "cuDeviceGetGraphMemAttribute"
    with pytest.raises(InvalidArgument) as info:
        dev.reset_graph_memory_high("used_mem_current")  # a current value cannot be reset
    assert info.value.op == "cuDeviceSetGraphMemAttribute"


def test_peer_semantics_on_itself(dev):
    assert dev.can_access_peer(dev) is True
    assert dev.can_access_peer(0) is True
    dev.enable_peer_access(dev)  # no-op
    for other in range(1, cu.device_count()):
        assert isinstance(dev.can_access_peer(other), bool)


def test_synchronize_and_bind(dev):
    dev.synchronize()
    dev.bind()
    dev.synchronize()
    cu.synchronize_current_context()  # the primary context, bound above
    seen = []

    def no_context():
        try:
            cu.synchronize_current_context()
        except InvalidState as exc:
            seen.append((exc.op, exc.code))

    t = threading.Thread(target=no_context)
    t.start()
    t.join()
    assert seen == [("cuCtxSynchronize", 201)]  # a new thread has no current context to wait for


def test_use_from_a_fresh_thread(dev):
    """A thread that never bound the context can create and use objects (bound on first use)."""
    out = {}

    def work():
        try:
            s = dev.create_stream()
            b = dev.alloc(256, "float32", stream=s)
            b.copy_from(np.arange(256, dtype=np.float32), stream=s)
            s.synchronize()
            out["data"] = b.copy_to_host()
            dev.synchronize()
            out["free"] = dev.memory_info()[0]
            b.close()
            s.close()
        except Exception as exc:
            out["error"] = exc

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert "error" not in out, out.get("error")
    np.testing.assert_array_equal(out["data"], np.arange(256, dtype=np.float32))


def test_existing_objects_from_a_fresh_thread(dev, kernels):
    """A thread that never bound a context uses streams, events, buffers, pools and kernels made elsewhere."""
    s = dev.create_stream()
    e = dev.create_event()
    pool = dev.create_pool(s)
    buf = dev.alloc(256, "float32", stream=s)
    fn = kernels.function("scale_offset")
    out = {}

    def work():
        try:
            buf.copy_from(np.arange(256, dtype=np.float32), stream=s)
            fn.launch(1, 256, buf, buf, 2.0, 1.0, 256, stream=s)
            e.record(s)
            e.synchronize()
            assert e.query()
            s.synchronize()
            assert s.query()
            p = pool.alloc(64)
            p.memset(0, stream=s)
            p.close()
            out["data"] = buf.copy_to_host(stream=s)
            s.synchronize()
        except Exception as exc:
            out["error"] = exc

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert "error" not in out, out.get("error")
    np.testing.assert_array_equal(out["data"], np.arange(256, dtype=np.float32) * 2 + 1)
    for x in (buf, pool, e, s):
        x.close()


@pytest.mark.parametrize("ordinal", [-1, 10_000, 1.5, "0", True, None])
def test_bad_ordinal(ordinal):
    with pytest.raises(InvalidArgument) as info:
        cu.Device(ordinal)
    assert info.value.op


def test_bad_ordinal_through_registry():
    with pytest.raises(InvalidArgument):
        ironaccel.open("cuda", cu.device_count())


def test_close_is_idempotent_and_use_after_close_raises():
    d = cu.Device(0)
    d.close()
    d.close()
    assert d.closed
    for call in (lambda: d.alloc(16), d.create_stream, d.create_event, d.synchronize, d.memory_info,
                 lambda: d.alloc_pinned(16), lambda: d.create_pool()):
        with pytest.raises(ClosedError) as info:
            call()
        assert info.value.op
    # other handles of the same device are unaffected
    other = cu.Device(0)
    other.alloc(16).close()
    other.close()
