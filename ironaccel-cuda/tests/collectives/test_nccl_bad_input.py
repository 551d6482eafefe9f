"""Bad input to the NCCL wrapper that once let a raw Python exception out; each now raises InvalidArgument.

A timeout past float's range (OverflowError from math.isinf), a non-iterable given to close_all
(TypeError), a WORLD_SIZE past NCCL's int (struct.error on the rendezvous request; rank 0 built a
set of every rank), a MASTER_ADDR that cannot be encoded as a host name (UnicodeError from the
connect).  Every case is refused before NCCL is loaded or a socket is opened, so the file needs
neither nccl4py nor a peer: it runs on a GPU, against the fake driver, and under the fake NCCL alike.
"""

from __future__ import annotations

import pytest
from helpers.expect import raises_exactly

from ironaccel import InvalidArgument

pytestmark = pytest.mark.backend("cuda")


@pytest.fixture
def nccl():
    from ironaccel_cuda import nccl as module

    return module


def test_timeout_past_float_range(nccl, dev, monkeypatch):
    # Once OverflowError("int too large to convert to float").
    uid = nccl.UniqueId.from_bytes(bytes(128))
    huge = 1 << 1100
    raises_exactly(InvalidArgument, "ncclCommInitRankConfig", nccl.Communicator, dev, 1, 0, uid, timeout=huge)
    raises_exactly(InvalidArgument, "ncclCommInitRankConfig", nccl.Communicator.init_all, [dev], timeout=huge)
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", str(dev.ordinal))
    raises_exactly(InvalidArgument, "Communicator.from_env", nccl.Communicator.from_env, timeout=huge)


def test_close_all_not_iterable(nccl):
    # Once TypeError("'int' object is not iterable").
    raises_exactly(InvalidArgument, "close_all", nccl.close_all, 5)
    raises_exactly(InvalidArgument, "close_all", nccl.close_all, None)


def test_from_env_world_size_past_int(nccl, dev, monkeypatch):
    # Once struct.error ("argument out of range") packing the rendezvous request on rank 1.
    monkeypatch.setenv("WORLD_SIZE", str(1 << 40))
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", str(dev.ordinal))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    raises_exactly(InvalidArgument, "Communicator.from_env", nccl.Communicator.from_env, timeout=1)


def test_from_env_master_addr_not_a_host_name(nccl, dev, monkeypatch):
    # Once UnicodeError ("encoding with 'idna' codec failed (UnicodeError: label too long)").
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", str(dev.ordinal))
    monkeypatch.setenv("MASTER_ADDR", "x" * 300)
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.delenv("IRONACCEL_NCCL_PORT", raising=False)
    monkeypatch.setenv("IRONACCEL_NCCL_BOOTSTRAP", "tcp")  # ironaccel's own rendezvous, even where torch is here
    raises_exactly(InvalidArgument, "rendezvous", nccl.Communicator.from_env, timeout=5)
