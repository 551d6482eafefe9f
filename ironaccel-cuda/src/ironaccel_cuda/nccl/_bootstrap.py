"""Handing the NCCL unique id to every rank through what the job already runs: a store or MPI.

A *store* is any object with `set(key, value)` and `get(key)` -- torch.distributed's `Store`
(TCPStore, FileStore, PrefixStore ...), or a shared dict wrapped so.  Rank 0 sets the 128-byte id
under `key`; every other rank polls `get(key)` (a missing key reads as `KeyError`/`LookupError` or
None; a torch store is asked `check([key])` first, so its own blocking timeout does not override
ours) and then acknowledges, with `add(key + "/acks", 1)` where the store has `add` (torch's do),
else by setting `key + "/ack/<rank>"`.  Rank 0 returns once every rank has acknowledged, so a store
it serves (the TCPStore from_env starts) outlives every read.

An *MPI communicator* (mpi4py's `Comm`, or anything with `Get_rank`, `Get_size` and `Ibcast` or
`bcast`) broadcasts the id from rank 0; with `Ibcast` the wait is polled under the same deadline.

`choose(env)` is how `Communicator.from_env` picks: IRONACCEL_NCCL_BOOTSTRAP (tcp, torch, mpi)
if set; else torchrun's variables with torch installed -> torch's store; MPI launcher variables
with mpi4py installed -> MPI.COMM_WORLD; else the home-made TCP rendezvous (_rendezvous.py).
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Mapping
from typing import Any

from ..errors import BACKEND, DriverError, InvalidArgument, NotAvailable
from ._binding import CollectiveTimeout
from ._rendezvous import ID_BYTES

__all__ = ["choose", "store_exchange", "mpi_exchange", "mpi_local_rank", "torch_store", "MPI_ENV", "BOOTSTRAP_ENV"]

BOOTSTRAP_ENV = "IRONACCEL_NCCL_BOOTSTRAP"
MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")
_CHOICES = ("tcp", "torch", "mpi")


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def choose(env: Mapping[str, str], op: str) -> str:
    """'torch', 'mpi' or 'tcp': how from_env hands out the unique id in this environment."""
    forced = env.get(BOOTSTRAP_ENV, "").strip().lower()
    if forced:
        if forced not in _CHOICES:
            raise InvalidArgument(BACKEND, op, detail=f"{BOOTSTRAP_ENV}={forced!r}: expected one of {_CHOICES}")
        return forced
    if env.get("RANK", "").strip() and env.get("WORLD_SIZE", "").strip():
        return "torch" if _installed("torch") else "tcp"
    if any(env.get(name, "").strip() for name in MPI_ENV) and _installed("mpi4py"):
        return "mpi"
    return "tcp"


def _pause(polls: int) -> None:
    time.sleep(min(0.05, 0.001 * (1 << min(polls, 6))))


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


def _store_call(op: str, what: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except (KeyError, LookupError):
        raise
    except Exception as exc:  # the store's own failure (a lost connection, its timeout): typed, with its text
        raise DriverError(BACKEND, op, detail=f"the store's {what} failed: {type(exc).__name__}: {exc}") from None


def _try_get(store: Any, key: str, op: str) -> Any:
    """The value under `key`, or None while it is not there (without blocking where the store can say)."""
    check = getattr(store, "check", None)
    if callable(check) and not _store_call(op, "check", check, [key]):
        return None
    try:
        return _store_call(op, "get", store.get, key)
    except (KeyError, LookupError):
        return None


def _as_id(value: Any, key: str, op: str) -> bytes:
    if isinstance(value, str):
        value = value.encode("latin-1", errors="replace")
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidArgument(BACKEND, op, detail=f"the store returned {type(value).__name__} under {key!r}, "
                              f"expected the {ID_BYTES}-byte id")
    raw = bytes(value)
    if len(raw) != ID_BYTES:
        raise InvalidArgument(BACKEND, op, detail=f"the store holds {len(raw)} bytes under {key!r}, expected the "
                              f"{ID_BYTES}-byte id (another program uses this key?)")
    return raw


def store_exchange(store: Any, payload: bytes | None, *, rank: int, nranks: int, key: str, timeout: float | None,
                   op: str) -> bytes:
    """Rank 0 passes the id and gets it back once every rank has read it; the others pass None and get it."""
    for name in ("set", "get"):
        if not callable(getattr(store, name, None)):
            raise InvalidArgument(BACKEND, op, detail=f"store must have set(key, value) and get(key) (a "
                                  f"torch.distributed Store, say); {type(store).__name__} has no {name}()")
    deadline = None if timeout is None else time.monotonic() + timeout
    add = getattr(store, "add", None)
    add = add if callable(add) else None
    acks = key + "/acks"
    if rank == 0:
        assert payload is not None and len(payload) == ID_BYTES
        _store_call(op, "set", store.set, key, payload)
        polls = 0
        while nranks > 1:
            missing: list[int] | None
            if add is not None:
                done = int(_store_call(op, "add", add, acks, 0))
                missing = [] if done >= nranks - 1 else None
            else:
                missing = [r for r in range(1, nranks) if _try_get(store, f"{key}/ack/{r}", op) is None]
            if missing == []:
                break
            left = _left(deadline)
            if left is not None and left <= 0:
                which = "" if missing is None else f" (ranks {missing[:16]}{' ...' if len(missing) > 16 else ''})"
                raise CollectiveTimeout(BACKEND, op, detail=f"rank 0 set the unique id under {key!r}, but not every "
                                        f"rank read it within {timeout} s{which}: a rank is missing, or the ranks "
                                        "use different stores or keys")
            polls += 1
            _pause(polls)
        return payload
    polls = 0
    while True:
        value = _try_get(store, key, op)
        if value is not None:
            raw = _as_id(value, key, op)
            if add is not None:
                _store_call(op, "add", add, acks, 1)
            else:
                _store_call(op, "set", store.set, f"{key}/ack/{rank}", b"1")
            return raw
        left = _left(deadline)
        if left is not None and left <= 0:
            raise CollectiveTimeout(BACKEND, op, detail=f"rank {rank} found no unique id under {key!r} within "
                                    f"{timeout} s: rank 0 has not started, or uses another store or key")
        polls += 1
        _pause(polls)


# -- MPI ---------------------------------------------------------------------------------------


def mpi_world(op: str) -> Any:
    """mpi4py's MPI.COMM_WORLD (importing mpi4py initialises MPI); NotAvailable without mpi4py."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise NotAvailable(BACKEND, f"{op}: mpi4py cannot be imported ({exc})", fix="pip install mpi4py",
                           named=True) from None
    return MPI.COMM_WORLD


def mpi_rank_size(comm: Any, op: str) -> tuple[int, int]:
    try:
        rank, size = int(comm.Get_rank()), int(comm.Get_size())
    except AttributeError:
        raise InvalidArgument(BACKEND, op, detail=f"expected an MPI communicator (mpi4py's Comm), got "
                              f"{type(comm).__name__}") from None
    except Exception as exc:
        raise DriverError(BACKEND, op, detail=f"MPI failed: {type(exc).__name__}: {exc}") from None
    return rank, size


def mpi_local_rank(comm: Any, op: str) -> int | None:
    """This process's rank among those of its node (COMM_TYPE_SHARED), or None where it cannot be asked."""
    split = getattr(comm, "Split_type", None)
    if not callable(split):
        return None
    try:
        from mpi4py import MPI

        node = split(MPI.COMM_TYPE_SHARED)
        try:
            return int(node.Get_rank())
        finally:
            node.Free()
    except Exception:
        return None


def mpi_exchange(comm: Any, payload: bytes | None, *, rank: int, timeout: float | None, op: str) -> bytes:
    """Broadcast rank 0's id over `comm`; with Ibcast, polled until the deadline."""
    buf = bytearray(payload if rank == 0 and payload is not None else bytes(ID_BYTES))
    try:
        ibcast = getattr(comm, "Ibcast", None)
        if callable(ibcast):
            request = ibcast(buf, root=0)
            deadline = None if timeout is None else time.monotonic() + timeout
            polls = 0
            while not request.Test():
                left = _left(deadline)
                if left is not None and left <= 0:
                    raise CollectiveTimeout(BACKEND, op, detail=f"rank {rank}: the MPI broadcast of the unique id "
                                            f"did not complete within {timeout} s: a rank has not joined it")
                polls += 1
                _pause(polls)
            return bytes(buf)
        got = comm.bcast(bytes(buf) if rank == 0 else None, root=0)
    except CollectiveTimeout:
        raise
    except Exception as exc:
        raise DriverError(BACKEND, op, detail=f"MPI broadcast of the unique id failed: {type(exc).__name__}: "
                          f"{exc}") from None
    return _as_id(got, "MPI broadcast", op)


# -- torch.distributed's store (from_env under torchrun) -----------------------------------------


def torch_store(host: str, port: int, master_port: int, rank: int, world: int, timeout: float | None,
                env: Mapping[str, str], op: str) -> Any:
    """The store of this torch job: the default process group's, torchrun's agent store, or one rank 0 serves."""
    import datetime

    try:
        import torch.distributed as dist
    except ImportError as exc:
        raise NotAvailable(BACKEND, f"{op}: torch.distributed cannot be imported ({exc})",
                           fix=f"install torch, or set {BOOTSTRAP_ENV}=tcp", named=True) from None
    limit = datetime.timedelta(seconds=timeout if timeout is not None else 365 * 86400)
    try:
        if dist.is_available() and dist.is_initialized():
            from torch.distributed import distributed_c10d

            getter = getattr(distributed_c10d, "_get_default_store", None)
            if getter is not None:
                return getter()
        if env.get("TORCHELASTIC_USE_AGENT_STORE", "").strip().lower() == "true":  # torchrun's agent serves it
            return dist.TCPStore(host, master_port, world, is_master=False, timeout=limit)
        return dist.TCPStore(host, port, world, is_master=rank == 0, timeout=limit, wait_for_workers=False)
    except Exception as exc:
        raise DriverError(BACKEND, op, detail=f"torch.distributed's store at {host}: {type(exc).__name__}: "
                          f"{exc}") from None


def job_prefix(env: Mapping[str, str]) -> str:
    """Keys of one attempt of a job: torchrun restarts workers with a new TORCHELASTIC_RESTART_COUNT."""
    return f"ironaccel/nccl/{env.get('TORCHELASTIC_RESTART_COUNT', '0').strip() or '0'}"


def environ() -> Mapping[str, str]:
    return os.environ
