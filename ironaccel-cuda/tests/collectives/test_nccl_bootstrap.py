"""NCCL bootstrap on the engines a job already runs: a store (set/get), MPI, the launcher's environment.

The exchange itself is plain Python and runs here with threads as ranks; the end-to-end run starts
ranks in separate processes (nccl_bootstrap_worker.py) over the fake libcuda and the fake NCCL in
its cross-process mode (FAKE_NCCL_SHARED_DIR), sharing a multiprocessing Manager dict as the store.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers.fakes import _env, fake_lib, fake_nccl  # noqa: F401  (fixtures)

import ironaccel
from ironaccel import DriverError, InvalidArgument, NotAvailable
from ironaccel_cuda.nccl import CollectiveTimeout, _bootstrap

HERE = Path(__file__).parent
OP = "Communicator.from_store"
ID = bytes(range(128))


class DictStore:
    """The bare protocol: set and get; a missing key raises KeyError."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.gets = 0

    def set(self, key, value):
        self.data[key] = value

    def get(self, key):
        self.gets += 1
        return self.data[key]


class TorchLikeStore(DictStore):
    """torch.distributed.Store's shape: get blocks on a missing key (here: fails), check and add exist."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def get(self, key):
        if key not in self.data:
            raise AssertionError("get() of a missing key would block until the store's own timeout")
        return self.data[key]

    def check(self, keys):
        return all(k in self.data for k in keys)

    def add(self, key, amount):
        with self.lock:
            value = int(self.data.get(key, b"0")) + amount
            self.data[key] = str(value).encode()
            return value


def run_ranks(store, n, key="k", timeout=10.0, skip=()):
    results, errors = {}, {}

    def rank(r):
        try:
            results[r] = _bootstrap.store_exchange(store, ID if r == 0 else None, rank=r, nranks=n, key=key,
                                                   timeout=timeout, op=OP)
        except Exception as exc:
            errors[r] = exc

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(n) if r not in skip]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results, errors


@pytest.mark.parametrize("kind", [DictStore, TorchLikeStore])
def test_every_rank_gets_rank_zeros_id(kind):
    store = kind()
    results, errors = run_ranks(store, 5)
    assert not errors and results == {r: ID for r in range(5)}
    if kind is TorchLikeStore:  # one counter of acknowledgements
        assert store.data["k/acks"] == b"4" and not any("/ack/" in k for k in store.data)
    else:
        assert sorted(k for k in store.data if "/ack/" in k) == [f"k/ack/{r}" for r in range(1, 5)]


def test_a_rank_without_rank_zero_times_out_naming_the_key():
    start = time.monotonic()
    results, errors = run_ranks(DictStore(), 3, timeout=0.5, skip=(0,))
    assert not results and set(errors) == {1, 2}
    for exc in errors.values():
        assert type(exc) is CollectiveTimeout and exc.op == OP and "'k'" in str(exc)
    assert time.monotonic() - start < 10


def test_rank_zero_names_the_ranks_that_never_read():
    results, errors = run_ranks(DictStore(), 4, timeout=0.5, skip=(2,))
    assert results == {1: ID, 3: ID}
    assert type(errors[0]) is CollectiveTimeout and "[2]" in str(errors[0])


def test_ranks_on_different_keys_do_not_meet():
    store = DictStore()
    errors = {}

    def one(r, key):
        try:
            _bootstrap.store_exchange(store, ID if r == 0 else None, rank=r, nranks=2, key=key, timeout=0.5, op=OP)
        except CollectiveTimeout as exc:
            errors[r] = exc

    threads = [threading.Thread(target=one, args=(0, "a")), threading.Thread(target=one, args=(1, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert set(errors) == {0, 1}


def test_bad_stores_are_typed_errors():
    class NoGet:
        def set(self, key, value):
            pass

    with pytest.raises(InvalidArgument, match=r"has no get\(\)") as info:
        _bootstrap.store_exchange(NoGet(), None, rank=1, nranks=2, key="k", timeout=1, op=OP)
    assert info.value.op == OP

    class Broken(DictStore):
        def get(self, key):
            raise ConnectionResetError("peer went away")

    with pytest.raises(DriverError, match="ConnectionResetError: peer went away") as info:
        _bootstrap.store_exchange(Broken(), None, rank=1, nranks=2, key="k", timeout=1, op=OP)
    assert type(info.value) is DriverError and info.value.op == OP
    for value, words in ((b"short", "holds 5 bytes"), (42, "returned int")):
        store = DictStore()
        store.set("k", value)
        with pytest.raises(InvalidArgument, match=words):
            _bootstrap.store_exchange(store, None, rank=1, nranks=2, key="k", timeout=1, op=OP)


def test_from_store_and_from_mpi_check_arguments_before_any_driver():
    from ironaccel_cuda.nccl import Communicator

    for rank, nranks, words in ((2, 2, "out of range"), (0, 0, "out of range"), ("0", 2, "must be an int"),
                                (0, True, "must be an int")):
        with pytest.raises(InvalidArgument, match=words) as info:
            Communicator.from_store(DictStore(), rank, nranks)
        assert info.value.op == OP
    with pytest.raises(InvalidArgument, match="key must be"):
        Communicator.from_store(DictStore(), 0, 1, key=b"bytes")
    with pytest.raises(InvalidArgument, match="expected an MPI communicator") as info:
        Communicator.from_mpi(object())
    assert info.value.op == "Communicator.from_mpi"


def test_from_mpi_without_mpi4py_says_what_to_install(monkeypatch):
    from ironaccel_cuda.nccl import Communicator

    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import fails as if absent
    with pytest.raises(NotAvailable, match="pip install mpi4py"):
        Communicator.from_mpi()


def test_the_launcher_environment_picks_the_engine(monkeypatch):
    installed: set[str] = set()
    monkeypatch.setattr(_bootstrap, "_installed", lambda name: name in installed)
    torchrun = {"RANK": "0", "WORLD_SIZE": "2"}
    mpirun = {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"}
    assert _bootstrap.choose(torchrun, OP) == "tcp"  # nothing installed: ironaccel's own rendezvous
    assert _bootstrap.choose(mpirun, OP) == "tcp"
    installed.update({"torch", "mpi4py"})
    assert _bootstrap.choose(torchrun, OP) == "torch"
    assert _bootstrap.choose(mpirun, OP) == "mpi"
    assert _bootstrap.choose({"PMI_SIZE": "4"}, OP) == "mpi"
    assert _bootstrap.choose({**torchrun, **mpirun}, OP) == "torch"  # torchrun's variables name the ranks
    assert _bootstrap.choose({**torchrun, "IRONACCEL_NCCL_BOOTSTRAP": "TCP"}, OP) == "tcp"
    with pytest.raises(InvalidArgument, match="IRONACCEL_NCCL_BOOTSTRAP='gloo'"):
        _bootstrap.choose({"IRONACCEL_NCCL_BOOTSTRAP": "gloo"}, OP)


class FakeRequest:
    def __init__(self, done):
        self.done = done

    def Test(self):
        return self.done()


class ThreadComm:
    """mpi4py's Comm shape (Get_rank, Get_size, Ibcast) over threads; `bcast_only` hides Ibcast."""

    def __init__(self, shared, rank, size):
        self.shared, self.rank, self.size = shared, rank, size

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def Ibcast(self, buf, root=0):
        if self.rank == root:
            self.shared["root"] = bytes(buf)
            return FakeRequest(lambda: True)

        def done():
            if "root" not in self.shared:
                return False
            buf[:] = self.shared["root"]
            return True

        return FakeRequest(done)


def test_mpi_broadcast_polls_under_the_deadline():
    shared: dict[str, bytes] = {}
    out = {}
    threads = [threading.Thread(target=lambda r=r: out.__setitem__(r, _bootstrap.mpi_exchange(
        ThreadComm(shared, r, 3), ID if r == 0 else None, rank=r, timeout=10, op="Communicator.from_mpi")))
        for r in (2, 1, 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert out == {0: ID, 1: ID, 2: ID}
    with pytest.raises(CollectiveTimeout, match="MPI broadcast"):
        _bootstrap.mpi_exchange(ThreadComm({}, 1, 2), None, rank=1, timeout=0.3, op="Communicator.from_mpi")


# -- ranks in separate processes, end to end over the fakes ------------------------------------------------


@pytest.fixture
def fakes_or_gpus(request, tmp_path):
    """(environment, ranks): over the fakes where there is no driver (3 ranks), else one rank per GPU."""
    if ironaccel.probe("cuda").available:
        from ironaccel_cuda import device_count

        n = device_count()
        return dict(os.environ, BOOTSTRAP_GPUS=str(n), NCCL_NVLS_ENABLE="0"), n
    fake = request.getfixturevalue("fake_lib")
    nccl = request.getfixturevalue("fake_nccl")
    shared = tmp_path / "shared"
    shared.mkdir()
    env = _env(fake, tmp_path, IRONACCEL_FAKE_NCCL="1", LD_PRELOAD=str(nccl), FAKE_NCCL_SHARED_DIR=str(shared),
               FAKE_NCCL_SHARED_WAIT="60", BOOTSTRAP_GPUS="2")
    env["LD_LIBRARY_PATH"] = os.pathsep.join((str(nccl.parent), env["LD_LIBRARY_PATH"]))
    return env, 3


def test_ranks_in_separate_processes_bootstrap_through_a_shared_store(fakes_or_gpus):
    pytest.importorskip("nccl.bindings.nccl", reason="nccl4py is not installed (pip install 'ironaccel-cuda[nccl]')")
    env, n = fakes_or_gpus
    out = subprocess.run([sys.executable, str(HERE / "nccl_bootstrap_worker.py"), str(n)], capture_output=True,
                         text=True, env=env, timeout=300, cwd=HERE)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-6000:]
    for r in range(n):
        assert (f"rank {r}: ok from_store all_reduce {n * (n + 1) // 2}; keyed broadcast 100; from_env (tcp) "
                "all_reduce max" in out.stdout), text[-6000:]
    keys = out.stdout.split("keys:", 1)[1].split()
    assert "ironaccel/nccl/0/store/0" in keys and "job/explicit" in keys
    shared = env.get("FAKE_NCCL_SHARED_DIR")
    if shared:  # three communicators, each joined by all three ranks in their own processes
        joins = sorted(p.name for p in Path(shared).iterdir() if ".join." in p.name)
        assert len(joins) == 9 and len({name.split(".")[0] for name in joins}) == 3, joins
