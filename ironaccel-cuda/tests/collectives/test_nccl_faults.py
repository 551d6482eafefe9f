"""NCCL results no real GPU can be made to return on demand, injected by the fake NCCL (tests/fakenccl).

Runs only under test_nccl_fake.py (IRONACCEL_FAKE_NCCL=1), and is not marked for the backend:
on a GPU machine it skips without failing a strict run.  It checks that injected results become
the typed errors, that asynchronous errors and inits that never complete abort the communicator,
and that closing, aborting and garbage collection leave nothing behind in NCCL.
"""

from __future__ import annotations

import ctypes
import os
import time

import pytest

from ironaccel import DriverError, InvalidArgument, InvalidState, OutOfMemory

pytestmark = pytest.mark.skipif(os.environ.get("IRONACCEL_FAKE_NCCL") != "1",
                                reason="fault injection needs the fake NCCL (test_nccl_fake.py)")


@pytest.fixture(scope="module")
def nccl():
    from ironaccel_cuda import nccl as module

    module.version()
    return module


@pytest.fixture
def fake():
    lib = ctypes.CDLL(None)
    lib.fake_nccl_counter.restype = ctypes.c_longlong
    yield lib
    lib.fake_nccl_fail(b"", 0)
    lib.fake_nccl_set(b"init_never", 0)
    lib.fake_nccl_set(b"async_error", 0)


def test_injected_results_become_typed_errors(nccl, dev, fake):
    buf = dev.alloc(16, "float32")
    c = nccl.Communicator(dev, 1, 0, nccl.UniqueId.new(), timeout=10)
    for code, kind, name in ((4, InvalidArgument, "ncclInvalidArgument"), (5, InvalidState, "ncclInvalidUsage"),
                             (2, DriverError, "ncclSystemError"), (6, DriverError, "ncclRemoteError")):
        fake.fake_nccl_fail(b"ncclAllReduce", code)
        with pytest.raises(kind) as info:
            c.all_reduce(buf)
        assert (info.value.op, info.value.code, info.value.code_name) == ("ncclAllReduce", code, name)
        assert "fake: ncclAllReduce failed on request" in str(info.value)
    fake.fake_nccl_fail(b"", 0)
    fake.fake_nccl_fail(b"ncclCommInitRankConfig", 3)
    with pytest.raises(DriverError) as init:
        nccl.Communicator(dev, 1, 0, nccl.UniqueId.new())
    assert init.value.code_name == "ncclInternalError" and init.value.op == "ncclCommInitRankConfig"
    fake.fake_nccl_fail(b"", 0)
    with pytest.raises(OutOfMemory) as oom:
        nccl.alloc(dev, dev.total_memory)
    assert oom.value.op == "ncclMemAlloc"
    c.close()
    buf.close()


def test_an_asynchronous_error_aborts_the_communicator(nccl, dev, fake):
    buf = dev.alloc(16, "float32")
    c = nccl.Communicator(dev, 1, 0, nccl.UniqueId.new(), timeout=10)
    aborts = fake.fake_nccl_counter(1)
    fake.fake_nccl_set(b"async_error", 6)
    with pytest.raises(DriverError) as info:
        c.all_reduce(buf)
    assert info.value.code_name == "ncclRemoteError" and "aborted" in str(info.value)
    assert c.closed and fake.fake_nccl_counter(1) == aborts + 1
    buf.close()


def test_an_init_that_never_completes_is_aborted_in_time(nccl, dev, fake):
    aborts = fake.fake_nccl_counter(1)
    fake.fake_nccl_set(b"init_never", 1)
    start = time.monotonic()
    with pytest.raises(nccl.CollectiveTimeout) as info:
        nccl.Communicator(dev, 1, 0, nccl.UniqueId.new(), timeout=0.3)
    assert 0.3 <= time.monotonic() - start < 5
    assert isinstance(info.value, TimeoutError) and info.value.op == "ncclCommInitRankConfig"
    assert fake.fake_nccl_counter(1) == aborts + 1


def test_nothing_is_left_behind(nccl, dev, fake):
    import gc

    before = [fake.fake_nccl_counter(i) for i in (0, 1, 2)]
    comms = [nccl.Communicator(dev, 1, 0, nccl.UniqueId.new()) for _ in range(3)]
    bufs = [dev.alloc(8), dev.alloc(8)]
    regs = [comms[0].register(bufs[0]), comms[1].register(bufs[1])]
    live = fake.fake_nccl_counter(4)
    comms[0].close()  # deregisters its buffers first
    assert regs[0].closed and fake.fake_nccl_counter(4) == live - 1
    comms[1].abort()  # NCCL drops the registrations of an aborted communicator itself
    regs[1].close()
    assert fake.fake_nccl_counter(4) == live - 1
    del comms  # the third, unreferenced, is aborted when collected
    gc.collect()
    after = [fake.fake_nccl_counter(i) for i in (0, 1, 2)]
    assert after[0] - before[0] == 3 and after[1] - before[1] == 2 and after[2] - before[2] == 1
    mem = fake.fake_nccl_counter(6)
    buf = nccl.alloc(dev, 64, "float32")
    assert fake.fake_nccl_counter(6) == mem + 1
    buf.close()
    assert fake.fake_nccl_counter(6) == mem
