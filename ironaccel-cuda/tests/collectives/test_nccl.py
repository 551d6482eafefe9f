"""NCCL on one GPU: one-rank communicators in both process models, every collective, events, bad input, errors.

Needs nccl4py and libnccl (`pip install 'ironaccel-cuda[nccl]'`); under IRONACCEL_REQUIRE=cuda their
absence fails these tests.  Several GPUs: test_nccl_multi.py.  On a CPU-only machine this file runs
against the fake driver and the fake NCCL (test_nccl_fake.py); the few checks that only real
hardware can make look at FAKE; fault injection is test_nccl_faults.py's (the fake NCCL only).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import FAKE
from helpers.nccl_checks import HANG_TIMEOUT, exercise, exercise_split, launch

from ironaccel import ClosedError, DriverError, InvalidArgument, NotAvailable

FAKE_NCCL = os.environ.get("IRONACCEL_FAKE_NCCL") == "1"
EXAMPLE = Path(__file__).parents[2] / "examples" / "nccl_allreduce.py"
SPIN_CYCLES = 50_000_000  # ~25 ms on a ~2 GHz SM clock: long enough that unordered work would overtake it

pytestmark = [
    pytest.mark.backend("cuda"),
    pytest.mark.skipif(FAKE and not FAKE_NCCL, reason="NCCL needs a GPU here; test_nccl_fake.py runs this "
                       "file against the fake NCCL"),
]


@pytest.fixture(scope="module")
def nccl():
    from ironaccel_cuda import nccl as module

    try:
        module.version()
    except NotAvailable as exc:
        pytest.skip(f"NCCL unavailable: {exc}")
    return module


@pytest.fixture
def comm(nccl, dev):
    c = nccl.Communicator(dev, 1, 0, nccl.UniqueId.new(), timeout=60)
    yield c
    c.close()


def test_version_unique_id_and_multicast_off(nccl):
    major, minor, patch = nccl.version()
    assert (major, minor) >= (2, 18), "ncclCommSplit and ncclCommRegister need NCCL 2.18+"
    assert os.environ.get("NCCL_NVLS_ENABLE") == "0"
    a, b = nccl.UniqueId.new(), nccl.UniqueId.new()
    assert len(bytes(a)) == 128 and a != b
    again = nccl.UniqueId.from_bytes(bytes(a))
    assert again == a and hash(again) == hash(a) and "UniqueId" in repr(a)
    with pytest.raises(InvalidArgument):
        nccl.UniqueId.from_bytes(b"short")
    with pytest.raises(InvalidArgument):
        nccl.UniqueId.from_bytes("not bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        nccl.UniqueId()


def test_one_rank_every_collective(nccl, comm):
    assert comm.rank == 0 and comm.nranks == 1 and comm.stream is comm.device.default_stream
    done = exercise([comm], 1)
    assert len(done) >= 25, done
    exercise_split([comm], 1)


def test_one_process_model_with_one_device(nccl, dev):
    comms = nccl.Communicator.init_all([dev], timeout=60)
    assert [(c.rank, c.nranks, c.device.ordinal) for c in comms] == [(0, 1, 0)]
    exercise(comms, 1)
    nccl.close_all(comms)
    assert all(c.closed for c in comms)


def test_one_rank_in_a_spawned_child_with_torchrun_variables(nccl):
    (result,) = launch(1, "collectives", timeout=240)
    assert result.returncode == 0 and "ok rank 0" in result.stdout, result.stdout[-4000:]


def test_the_example_runs_as_one_process(nccl):
    out = subprocess.run([sys.executable, str(EXAMPLE), "-n", "1"], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "rank 0 of 1" in out.stdout and "nccl all-reduce ok on 1 GPU(s)" in out.stdout


def test_events_order_a_collective_with_other_streams(nccl, dev, kernels):
    comm_stream, other = dev.create_stream(), dev.create_stream()
    comm = nccl.Communicator(dev, 1, 0, nccl.UniqueId.new(), stream=comm_stream, timeout=60)
    n = 1 << 20
    data = np.arange(n, dtype=np.float32)
    src = dev.alloc(n, "float32", stream=comm_stream)
    dst = dev.alloc(n, "float32", stream=comm_stream)
    src.copy_from(data)
    dst.memset(0)
    spin = kernels.function("spin")
    # the collective after a busy kernel on its stream; another stream reads the result after an event
    spin.launch(1, 1, SPIN_CYCLES, stream=comm_stream)
    comm.all_reduce(src, dst)
    done = comm_stream.record()
    if not FAKE:
        assert not done.query(), "the spin kernel should still be running"
    other.wait(done)
    out = np.empty(n, np.float32)
    dst.copy_to_host(out, stream=other)
    other.synchronize()
    np.testing.assert_array_equal(out, data)
    # and the other way: work on another stream, then the collective waits for its event
    later = (data * 3).astype(np.float32)
    spin.launch(1, 1, SPIN_CYCLES, stream=other)
    src.copy_from(later, stream=other)
    ready = other.record()
    comm_stream.wait(ready)
    comm.all_reduce(src, dst, op="max")
    comm.synchronize()
    np.testing.assert_array_equal(dst.copy_to_host(), later)
    for x in (src, dst, done, ready):
        x.close()
    comm.close()
    comm_stream.close()
    other.close()


def test_explicit_streams(nccl, comm, dev):
    s = dev.create_stream()
    buf = dev.alloc(4096, "float64", stream=s)
    buf.copy_from(np.linspace(0, 1, 4096))
    out = dev.alloc(4096, "float64", stream=s)
    comm.all_reduce(buf, out, op="min", stream=s)
    comm.broadcast(out, root=0, stream=s)
    comm.synchronize(stream=s, timeout=30)
    np.testing.assert_array_equal(out.copy_to_host(), np.linspace(0, 1, 4096))
    buf.close()
    out.close()
    s.close()


def test_buffers_from_growable_virtual_memory_and_driver_pools(nccl, comm, dev):
    if FAKE:
        pytest.skip("the fake driver has no cuMemCreate / cuMemPool*")
    from ironaccel_cuda._driver import call, driver
    from ironaccel_cuda.memory import adopt

    drv = driver()
    dev.bind()
    # cuMemCreate + cuMemAddressReserve + cuMemMap, as a growable buffer builds it
    prop = drv.CUmemAllocationProp()
    prop.type = drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = dev.ordinal
    gran = int(call("cuMemGetAllocationGranularity", prop,
                    drv.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM))
    size = 4 * gran
    handle = call("cuMemCreate", size, prop, 0)
    base = call("cuMemAddressReserve", size, gran, 0, 0)
    call("cuMemMap", base, size, 0, handle, 0)
    access = drv.CUmemAccessDesc()
    access.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = dev.ordinal
    access.flags = drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    call("cuMemSetAccess", base, size, [access], 1)
    released = []

    def release_vmm() -> None:
        call("cuMemUnmap", base, size)
        call("cuMemAddressFree", base, size)
        call("cuMemRelease", handle)
        released.append("vmm")

    n = size // 4
    vmm = adopt(int(base), n, "float32", dev, release=release_vmm)
    # cuMemAllocFromPoolAsync from a pool of our own
    pool_props = drv.CUmemPoolProps()
    pool_props.allocType = drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    pool_props.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    pool_props.location.id = dev.ordinal
    pool = call("cuMemPoolCreate", pool_props)
    stream = comm.stream
    ptr = call("cuMemAllocFromPoolAsync", n * 4, pool, stream.handle)

    def release_pool() -> None:
        call("cuMemFreeAsync", ptr, stream.handle)
        stream.synchronize()
        released.append("pool")

    pooled = adopt(int(ptr), n, "float32", dev, stream=stream, release=release_pool)
    data = np.arange(n, dtype=np.float32) % 1000
    vmm.copy_from(data)
    comm.all_reduce(vmm, pooled)
    comm.all_gather(pooled, vmm)
    comm.broadcast(vmm, pooled, root=0)
    comm.synchronize()
    np.testing.assert_array_equal(pooled.copy_to_host(), data)
    np.testing.assert_array_equal(vmm.copy_to_host(), data)
    vmm.close()
    pooled.close()
    call("cuMemPoolDestroy", pool)
    assert released == ["vmm", "pool"]


def test_nccl_memory_and_registration(nccl, comm, dev):
    n = 1 << 18
    buf = nccl.alloc(dev, n, "float32")
    assert buf.size == n and buf.device is dev
    buf.copy_from(np.full(n, 7, np.float32))
    reg = comm.register(buf)
    assert not reg.closed and reg.buffer is buf and "Registration" in repr(reg)
    out = nccl.alloc(dev, n, "float32")
    with comm.register(out) as reg2:
        comm.all_reduce(buf, out)
        comm.all_reduce(buf, op="prod")
        comm.synchronize()
    assert reg2.closed
    np.testing.assert_array_equal(out.copy_to_host(), np.full(n, 7, np.float32))
    reg.close()
    reg.close()  # idempotent
    buf.close()
    out.close()


def test_errors_from_nccl_are_typed(nccl, dev):
    # more than the GPU has: cuMemCreate (or cudaMalloc) fails inside ncclMemAlloc
    with pytest.raises(DriverError) as info:
        nccl.alloc(dev, dev.total_memory, "uint8")
    err = info.value
    assert err.op == "ncclMemAlloc" and err.code == 1 and err.code_name == "ncclUnhandledCudaError", repr(err)
    assert "ncclUnhandledCudaError (1)" in str(err)


def test_bad_input(nccl, comm, dev):
    b32, b64, small = dev.alloc(64, "float32"), dev.alloc(64, "float64"), dev.alloc(32, "float32")
    uid = nccl.UniqueId.new()

    def bad(fn, *args, name=None, **kwargs):
        with pytest.raises(InvalidArgument) as info:
            fn(*args, **kwargs)
        if name is not None:
            assert info.value.op == name, info.value
        return info.value

    bad(comm.all_reduce, b32, b64, name="ncclAllReduce")
    bad(comm.all_reduce, b32, small, name="ncclAllReduce")
    assert "DeviceBuf" in str(bad(comm.all_reduce, np.zeros(4, np.float32)))
    bad(comm.all_reduce, b32, op="mean")
    bad(comm.all_reduce, b32, op=None)
    assert "int16" in str(bad(comm.all_reduce, dev.alloc(8, "int16"), name="ncclAllReduce"))
    bad(comm.all_reduce, dev.alloc(8, "bool"))
    bad(comm.reduce, dev.alloc(8, "complex64"), op="max")
    bad(comm.all_gather, b32, small, name="ncclAllGather")
    bad(comm.reduce_scatter, small, b32, name="ncclReduceScatter")
    bad(comm.broadcast, b32, root=1, name="ncclBroadcast")
    bad(comm.broadcast, b32, root=True)
    bad(comm.reduce, b32, root=-1, name="ncclReduce")
    bad(comm.send, b32, 1, name="ncclSend")
    bad(comm.recv, b32, "0", name="ncclRecv")
    bad(comm.all_reduce, b32, stream="s")
    bad(comm.synchronize, timeout=-1)
    bad(comm.split, -2, name="ncclCommSplit")
    bad(comm.split, "a")
    bad(comm.register, np.zeros(3), name="ncclCommRegister")
    with nccl.group():
        bad(comm.register, b32, name="ncclCommRegister")
    bad(nccl.Communicator, dev, 0, 0, uid, name="ncclCommInitRankConfig")
    bad(nccl.Communicator, dev, 1, 1, uid)
    bad(nccl.Communicator, dev, 1, 0, bytes(uid))
    bad(nccl.Communicator, dev, 1, 0, uid, timeout=0)
    bad(nccl.Communicator, dev, 1, 0, uid, timeout=float("inf"))
    bad(nccl.Communicator, "0", 1, 0, uid)
    bad(nccl.Communicator, dev, 1, 0, uid, stream=object())
    bad(nccl.Communicator.init_all, [])
    bad(nccl.Communicator.init_all, [dev, dev])
    bad(nccl.Communicator.init_all, "0")
    bad(nccl.alloc, dev, 0, name="ncclMemAlloc")
    bad(nccl.alloc, dev, 16, "nope")
    bad(nccl.close_all, [1])
    s = dev.create_stream()
    s.close()
    with pytest.raises(ClosedError):
        comm.all_reduce(b32, stream=s)
    gone = dev.alloc(8, "float32")
    gone.close()
    with pytest.raises(ClosedError):
        comm.all_reduce(gone)
    with pytest.raises(ClosedError):
        comm.all_gather(b32, gone)
    for b in (b32, b64, small):
        b.close()


def test_from_env_checks_the_variables(nccl, monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "IRONACCEL_NCCL_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(InvalidArgument, match="WORLD_SIZE"):
        cu_nccl_from_env(nccl)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "two")
    with pytest.raises(InvalidArgument, match="not an integer"):
        cu_nccl_from_env(nccl)
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(InvalidArgument, match="out of range"):
        cu_nccl_from_env(nccl)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    with pytest.raises(InvalidArgument, match="MASTER_ADDR"):
        cu_nccl_from_env(nccl)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with pytest.raises(InvalidArgument, match="MASTER_PORT"):
        cu_nccl_from_env(nccl)
    monkeypatch.setenv("MASTER_PORT", "65535")
    with pytest.raises(InvalidArgument, match="out of range"):
        cu_nccl_from_env(nccl)


def cu_nccl_from_env(nccl):
    return nccl.Communicator.from_env(timeout=5)


def test_close_abort_and_use_after(nccl, dev):
    with nccl.Communicator(dev, 1, 0, nccl.UniqueId.new(), timeout=60) as c:
        assert not c.closed and c.handle and "rank 0 of 1" in repr(c)
    assert c.closed and "closed" in repr(c)
    c.close()  # idempotent
    c.abort()  # nothing left to abort
    buf = dev.alloc(8, "float32")
    with pytest.raises(ClosedError) as info:
        c.all_reduce(buf)
    assert info.value.op == "ncclAllReduce"
    for call in (c.synchronize, lambda: c.split(0), lambda: c.register(buf), lambda: c.handle):
        with pytest.raises(ClosedError):
            call()
    d = nccl.Communicator(dev, 1, 0, nccl.UniqueId.new(), timeout=60)
    d.abort()
    d.abort()
    assert d.closed
    with pytest.raises(ClosedError):
        d.broadcast(buf)
    buf.close()


def test_a_missing_peer_times_out_and_aborts_the_init(nccl):
    # run in a child: NCCL's bootstrap of the aborted init keeps a thread waiting for the missing rank
    (result,) = launch(1, "init-timeout", timeout=120)
    assert result.returncode == 0 and "ok: init timed out" in result.stdout, result.stdout[-4000:]
    elapsed = float(result.stdout.split("timed out after ")[1].split(" s")[0])
    assert HANG_TIMEOUT - 0.5 <= elapsed < HANG_TIMEOUT + 35, result.stdout
