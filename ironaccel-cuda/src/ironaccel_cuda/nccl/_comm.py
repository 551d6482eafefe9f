"""Communicator, UniqueId, group(), Registration and alloc(): NCCL on DeviceBufs and Streams.

Every communicator is created non-blocking (`ncclConfig_t.blocking = 0`), so no NCCL call can hang
the caller: a call that NCCL answers with ncclInProgress (initialisation, split, finalize, a group
end, a collective that first connects to its peers) is followed by polling `ncclCommGetAsyncError`
until the communicator is ready, for at most the communicator's `timeout`; past it the communicator
is aborted (`ncclCommAbort`) and `CollectiveTimeout` raised.  An asynchronous error reported while
polling aborts the communicator too and raises the typed error of that result.  Work that hangs on
the GPU (a peer that never joins a collective) is caught by `synchronize()`, which polls an event
and the communicator's error state under the same deadline.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from .. import _driver
from .._core import CLOSED
from ..allocator import check_stream, element_count
from ..device import Device
from ..errors import BACKEND, DriverError, closed, invalid
from ..memory import DeviceBuf, adopt
from ..stream import Stream
from . import _bootstrap
from ._binding import (
    IN_PROGRESS,
    MOVES,
    SPLIT_NOCOLOR,
    SUCCESS,
    CollectiveTimeout,
    ReduceOp,
    binding,
    call,
    nccl_error,
    reduce_args,
    translate,
)
from ._rendezvous import ID_BYTES, exchange

__all__ = ["Communicator", "ReduceOp", "Registration", "UniqueId", "alloc", "close_all", "group", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 600.0
"""Seconds a communicator waits for its peers (initialisation, split, close, synchronize) by default."""

_exchanges = itertools.count()  # from_env calls of this process: the rendezvous tag
_store_exchanges = itertools.count()  # from_store calls of this process without a key: the key's count


class _GroupState(threading.local):
    """Per thread: how deep in group() it is, and the (communicator, op) pairs to settle at the outermost end."""

    def __init__(self) -> None:
        self.depth = 0
        self.pending: dict[Communicator, str] = {}


_tls = _GroupState()
_groups_lock = threading.Lock()
_open_groups = 0  # group() blocks open on any thread: while 0, no thread is inside one (the hot path reads only this)


class UniqueId:
    """The 128 bytes that every rank of one communicator is created with (ncclGetUniqueId).

    `UniqueId.new()` on one rank, then `bytes(uid)` to the others (any channel), who rebuild it
    with `UniqueId.from_bytes`.  `Communicator.from_env` does that exchange itself.
    """

    __slots__ = ("_bytes",)
    _bytes: bytes

    def __init__(self) -> None:
        raise TypeError("make unique ids with UniqueId.new() or UniqueId.from_bytes()")

    @classmethod
    def new(cls) -> UniqueId:
        nb = binding()
        raw = call("ncclGetUniqueId", nb.get_unique_id)
        return cls._make(bytes(memoryview(raw)))

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> UniqueId:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise invalid("UniqueId.from_bytes", f"expected {ID_BYTES} bytes, got {type(data).__name__}")
        raw = bytes(data)
        if len(raw) != ID_BYTES:
            raise invalid("UniqueId.from_bytes", f"expected {ID_BYTES} bytes, got {len(raw)}")
        return cls._make(raw)

    @classmethod
    def _make(cls, raw: bytes) -> UniqueId:
        uid = object.__new__(cls)
        uid._bytes = raw
        return uid

    def __bytes__(self) -> bytes:
        return self._bytes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UniqueId) and other._bytes == self._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __repr__(self) -> str:
        return "<nccl.UniqueId>"


# -- settling: polling ncclCommGetAsyncError under a deadline ---------------------


def _in_group() -> bool:
    return _tls.depth > 0


def _defer(comm: Communicator, op: str) -> None:
    _tls.pending.setdefault(comm, op)


def _pause(polls: int) -> None:
    """Between two polls of NCCL's state: yield for the first 64, then back off from 10 us to 1 ms."""
    time.sleep(0 if polls < 64 else min(1e-3, 1e-5 * (1 << min(polls - 64, 7))))


def _settle(entries: dict[Communicator, str], *, quiet: bool = False) -> None:
    """Wait until every communicator in `entries` is ready; abort the failed and the late; raise the first error."""
    nb = binding()
    limits = [c.timeout for c in entries if c.timeout is not None]
    deadline = time.monotonic() + min(limits) if limits else None
    waiting = dict(entries)
    errors: list[Exception] = []
    polls = 0
    while waiting:
        for comm, op in list(waiting.items()):
            h = comm._comm
            if h is None:
                del waiting[comm]
                continue
            if not h.handle:  # a split's new communicator: NCCL writes its handle when the split completes
                if comm._parent is not None and comm._parent in waiting:
                    continue
                errors.append(DriverError(BACKEND, op, detail="the split completed without making a communicator"))
                comm._forget()
                del waiting[comm]
                continue
            comm._parent = None
            try:
                state = nb.comm_get_async_error(h)
            except Exception as exc:
                errors.append(translate("ncclCommGetAsyncError", exc, h))
                comm._abort_quietly()
                del waiting[comm]
                continue
            if state == IN_PROGRESS:
                continue
            del waiting[comm]
            if state != SUCCESS:
                note = "reported while waiting; the communicator was aborted"
                errors.append(nccl_error(op, int(state), h, note=note))
                comm._abort_quietly()
        if not waiting:
            break
        if deadline is not None and time.monotonic() >= deadline:
            ops = sorted(set(waiting.values()))
            ranks = sorted(c._rank_text() for c in waiting)
            for comm in waiting:
                comm._abort_quietly()
            errors.append(CollectiveTimeout(BACKEND, ops[0], detail=(
                f"{', '.join(ops)} made no progress within {min(limits)} s on rank(s) {', '.join(ranks)}: a peer is "
                "missing or hung; the communicator was aborted")))
            break
        polls += 1
        _pause(polls)
    if errors and not quiet:
        raise errors[0]


class group:
    """`with nccl.group():` -- NCCL group calls (ncclGroupStart / ncclGroupEnd); nests.

    Inside, collectives and point-to-point calls are only queued: NCCL launches them together at
    the end of the outermost group.  One process driving several GPUs must issue each step's
    calls for all of its communicators inside one group (and create or split them inside one);
    paired send/recv need one too.  Leaving the outermost group waits until every communicator
    used in it is ready (see Communicator.timeout).
    """

    __slots__ = ("_nb",)

    def __init__(self) -> None:
        self._nb = binding()

    def __enter__(self) -> group:
        global _open_groups
        call("ncclGroupStart", self._nb.group_start)
        if _tls.depth == 0:
            _tls.pending = {}
        _tls.depth += 1
        with _groups_lock:
            _open_groups += 1
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        global _open_groups
        with _groups_lock:
            _open_groups -= 1
        _tls.depth -= 1
        outermost = _tls.depth == 0
        pending: dict[Communicator, str] = _tls.pending if outermost else {}
        if outermost:
            _tls.pending = {}
        try:
            call("ncclGroupEnd", self._nb.group_end)
        except Exception:
            for comm, op in pending.items():
                if op in _INIT_OPS:
                    comm._abort_quietly()
            if kind is None:
                raise
            return
        if kind is not None:  # the group's body failed: communicators it was creating cannot complete
            for comm, op in list(pending.items()):
                if op in _INIT_OPS:
                    comm._abort_quietly()
                    del pending[comm]
        if pending:
            _settle(pending, quiet=kind is not None)


_INIT_OPS = frozenset({"ncclCommInitRankConfig", "ncclCommSplit"})


# -- argument checks (cold unless noted) --------------------------------------------


def _device_arg(device: Any, op: str) -> Device:
    if isinstance(device, Device):
        device._check_open(op)
        return device
    if isinstance(device, bool) or not isinstance(device, int):
        raise invalid(op, f"device must be a Device or an ordinal (int), got {device!r}")
    return Device(device)


def _timeout_arg(timeout: Any, op: str) -> float | None:
    if timeout is None:
        return None
    try:
        bad = (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
               or math.isinf(timeout))
    except OverflowError:  # an int past float's range
        bad = True
    if bad:
        raise invalid(op, f"timeout must be a positive number of seconds or None (wait forever), got {timeout!r}")
    return float(timeout)


def _int_arg(value: Any, what: str, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(op, f"{what} must be an int, got {value!r}")
    return value


def _stream_arg(stream: Any, device: Device, op: str) -> Stream:
    s = check_stream(device, stream, op)
    if s._ordinal != device.ordinal:
        raise invalid(op, f"the stream is on cuda:{s._ordinal}, the communicator on cuda:{device.ordinal}")
    return s


def _env_int(name: str, op: str, default: int | None = None) -> int:
    text = os.environ.get(name)
    if text is None or not text.strip():
        if default is not None:
            return default
        raise invalid(op, f"environment variable {name} is not set (launch with torchrun, or set RANK, WORLD_SIZE, "
                      "LOCAL_RANK, MASTER_ADDR and MASTER_PORT)")
    try:
        return int(text)
    except ValueError:
        raise invalid(op, f"environment variable {name}={text!r} is not an integer") from None


class Communicator:
    """One rank of an NCCL communicator, bound to one Device.

        uid = nccl.UniqueId.new()                      # on one rank; send bytes(uid) to the others
        comm = nccl.Communicator(dev, nranks, rank, uid)
        comm = nccl.Communicator.from_env()            # the launcher's: torchrun, mpirun (see from_env)
        comm = nccl.Communicator.from_store(store, rank, nranks)  # a torch.distributed Store, any set/get
        comm = nccl.Communicator.from_mpi(MPI.COMM_WORLD)          # mpi4py
        comms = nccl.Communicator.init_all([0, 1])     # one process, several GPUs

    Collectives take DeviceBufs of this communicator's device and run asynchronously on `stream`
    (default: the communicator's stream, itself by default the device's default stream); order other
    work with events as usual, or call `synchronize()`.  `recv=None` means in place.  Reductions
    take int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32 and float64, and
    complex64/128 for sum and avg; data movement (all_gather, broadcast, send, recv) takes any
    dtype.  A communicator is not thread-safe.
    """

    __slots__ = ("_comm", "_nb", "_cfg", "_parent", "device", "_ordinal", "stream", "_sh", "timeout", "_rank",
                 "_nranks", "_event", "_registrations", "__weakref__")

    def __init__(self, device: Device | int, nranks: int, rank: int, unique_id: UniqueId, *,
                 stream: Stream | None = None, timeout: float | None = DEFAULT_TIMEOUT):
        op = "ncclCommInitRankConfig"
        dev, nranks, rank, stream, timeout = self._check_init(device, nranks, rank, stream, timeout, op)
        if not isinstance(unique_id, UniqueId):
            raise invalid(op, f"unique_id must be a UniqueId, got {type(unique_id).__name__}")
        nb = binding()
        self._setup(nb, dev, stream, timeout, rank, nranks)
        self._start(unique_id)
        if _in_group():
            _defer(self, op)
        else:
            _settle({self: op})

    @staticmethod
    def _check_init(device: Any, nranks: Any, rank: Any, stream: Any, timeout: Any,
                    op: str) -> tuple[Device, int, int, Stream, float | None]:
        if _driver.forked:
            raise _driver.fork_error(op)
        dev = _device_arg(device, op)
        nranks = _int_arg(nranks, "nranks", op)
        rank = _int_arg(rank, "rank", op)
        if nranks < 1:
            raise invalid(op, f"nranks must be at least 1, got {nranks}")
        if not 0 <= rank < nranks:
            raise invalid(op, f"rank {rank} is out of range for {nranks} rank(s)")
        return dev, nranks, rank, _stream_arg(stream, dev, op), _timeout_arg(timeout, op)

    def _setup(self, nb: Any, dev: Device, stream: Stream, timeout: float | None, rank: int | None,
               nranks: int | None) -> None:
        self._comm: Any = None
        self._nb = nb
        self._cfg: Any = None
        self._parent: Communicator | None = None  # of a split still in progress
        self.device = dev
        self._ordinal = dev.ordinal
        self.stream = stream
        self._sh = int(stream._h)  # used while stream._h is not CLOSED
        self.timeout = timeout
        self._rank = rank
        self._nranks = nranks
        self._event: Any = None
        self._registrations: weakref.WeakSet[Registration] = weakref.WeakSet()

    def _start(self, unique_id: UniqueId) -> None:
        nb = self._nb
        cfg = nb.Config()
        cfg.blocking = 0
        self._cfg = cfg  # NCCL may read it after the call returns
        uid = nb.UniqueId()
        memoryview(uid).cast("B")[:] = bytes(unique_id)
        self.device.bind()  # NCCL creates the communicator on the calling thread's current device
        out = call("ncclCommInitRankConfig", nb.comm_init_rank_config, self._nranks, uid, self._rank, cfg.ptr)
        self._comm = _as_comm(nb, out)

    @classmethod
    def init_all(cls, devices: Sequence[Device | int], *, timeout: float | None = DEFAULT_TIMEOUT
                 ) -> list[Communicator]:
        """One communicator per device of this process, rank i on devices[i] (one group of inits)."""
        op = "ncclCommInitRankConfig"
        if isinstance(devices, (str, bytes)) or not isinstance(devices, Iterable):
            raise invalid(op, f"devices must be a sequence of Devices or ordinals, got {devices!r}")
        devs = [_device_arg(d, op) for d in devices]
        if not devs:
            raise invalid(op, "devices is empty")
        ordinals = [d.ordinal for d in devs]
        if len(set(ordinals)) != len(ordinals):
            raise invalid(op, f"each device may appear once (NCCL runs one rank per GPU), got cuda:{ordinals}")
        checked = [cls._check_init(d, len(devs), r, None, timeout, op) for r, d in enumerate(devs)]
        uid = UniqueId.new()
        comms = []
        with group():
            for dev, nranks, rank, stream, limit in checked:
                comm = object.__new__(cls)
                comm._setup(binding(), dev, stream, limit, rank, nranks)
                comms.append(comm)
                comm._start(uid)
                _defer(comm, op)
        return comms

    @classmethod
    def from_store(cls, store: Any, rank: int, nranks: int, *, device: Device | int | None = None,
                   stream: Stream | None = None, timeout: float | None = DEFAULT_TIMEOUT,
                   key: str | None = None) -> Communicator:
        """Rank `rank` of `nranks`, its unique id handed out through `store` (anything with set/get).

        A torch.distributed Store (TCPStore, FileStore, the default group's) or any object with
        `set(key, value)` and `get(key)` shared by the ranks: rank 0 sets the id under `key`, the
        others read it (see _bootstrap.py).  Every rank must create its communicators from the store
        in the same order (the default key counts them), or pass the same `key`.  `device`
        defaults to LOCAL_RANK if set, else `rank`.  Waits at most `timeout` for the other ranks.
        """
        op = "Communicator.from_store"
        nranks = _int_arg(nranks, "nranks", op)
        rank = _int_arg(rank, "rank", op)
        if not 1 <= nranks < 1 << 31:
            raise invalid(op, f"nranks={nranks} is out of range (1 to 2**31 - 1)")
        if not 0 <= rank < nranks:
            raise invalid(op, f"rank {rank} is out of range for {nranks} rank(s)")
        if key is None:
            key = f"{_bootstrap.job_prefix(os.environ)}/store/{next(_store_exchanges)}"
        elif not isinstance(key, str) or not key:
            raise invalid(op, f"key must be a non-empty str, got {key!r}")
        limit = _timeout_arg(timeout, op)
        dev = _device_arg(_env_int("LOCAL_RANK", op, default=rank) if device is None else device, op)
        payload = bytes(UniqueId.new()) if rank == 0 else None
        raw = _bootstrap.store_exchange(store, payload, rank=rank, nranks=nranks, key=key, timeout=limit, op=op)
        return cls(dev, nranks, rank, UniqueId.from_bytes(raw), stream=stream, timeout=limit)

    @classmethod
    def from_mpi(cls, comm: Any = None, *, device: Device | int | None = None, stream: Stream | None = None,
                 timeout: float | None = DEFAULT_TIMEOUT) -> Communicator:
        """The communicator of this MPI rank: one rank per process of `comm` (default mpi4py's COMM_WORLD).

        Rank and size are `comm`'s; rank 0's unique id reaches the others by an MPI broadcast (polled
        under `timeout` where the communicator has Ibcast).  `device` defaults to this process's
        rank among those of its node.
        """
        op = "Communicator.from_mpi"
        if comm is None:
            comm = _bootstrap.mpi_world(op)
        rank, nranks = _bootstrap.mpi_rank_size(comm, op)
        limit = _timeout_arg(timeout, op)
        if device is None:
            local = _bootstrap.mpi_local_rank(comm, op)
            device = local if local is not None else _env_int("LOCAL_RANK", op, default=rank)
        dev = _device_arg(device, op)
        payload = bytes(UniqueId.new()) if rank == 0 else None
        raw = _bootstrap.mpi_exchange(comm, payload, rank=rank, timeout=limit, op=op)
        return cls(dev, nranks, rank, UniqueId.from_bytes(raw), stream=stream, timeout=limit)

    @classmethod
    def from_env(cls, *, device: Device | int | None = None, stream: Stream | None = None,
                 timeout: float | None = DEFAULT_TIMEOUT) -> Communicator:
        """The communicator of this process, from its launcher's environment (torchrun, mpirun, srun ...).

        Under torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT): with torch installed
        the id travels through torch.distributed's store (the default process group's if one is
        initialised, torchrun's agent store, else a TCPStore that rank 0 serves on
        IRONACCEL_NCCL_PORT, default MASTER_PORT + 1); without torch, through ironaccel's own TCP
        rendezvous on that port.  Under an MPI launcher with mpi4py installed: `from_mpi()`.
        IRONACCEL_NCCL_BOOTSTRAP=tcp|torch|mpi forces one.  Each side waits at most `timeout`.
        """
        op = "Communicator.from_env"
        how = _bootstrap.choose(os.environ, op)
        if how == "mpi":
            return cls.from_mpi(device=device, stream=stream, timeout=timeout)
        world = _env_int("WORLD_SIZE", op)
        rank = _env_int("RANK", op)
        local = _env_int("LOCAL_RANK", op, default=rank)
        if not 1 <= world < 1 << 31:  # NCCL's nranks is a C int
            raise invalid(op, f"WORLD_SIZE={world} is out of range (1 to 2**31 - 1)")
        if not 0 <= rank < world:
            raise invalid(op, f"RANK={rank} is out of range for WORLD_SIZE={world}")
        limit = _timeout_arg(timeout, op)
        dev = _device_arg(local if device is None else device, op)
        host, port, master_port = "127.0.0.1", 0, 0
        if world > 1:
            host = os.environ.get("MASTER_ADDR", "").strip()
            if not host:
                raise invalid(op, "environment variable MASTER_ADDR is not set (the host of rank 0)")
            master_port = _env_int("MASTER_PORT", op)
            port = _env_int("IRONACCEL_NCCL_PORT", op, default=-1)
            if port < 0:
                port = master_port + 1
            if not 0 < port < 65536:
                raise invalid(op, f"the rendezvous port {port} is out of range")
        tag = next(_exchanges)
        payload = bytes(UniqueId.new()) if rank == 0 else None
        if how == "torch" and world > 1:
            store = _bootstrap.torch_store(host, port, master_port, rank, world, limit, os.environ, op)
            key = f"{_bootstrap.job_prefix(os.environ)}/env/{tag}"
            raw = _bootstrap.store_exchange(store, payload, rank=rank, nranks=world, key=key, timeout=limit, op=op)
        else:
            raw = exchange(payload, rank=rank, world=world, host=host, port=port, timeout=limit, tag=tag)
        return cls(dev, world, rank, UniqueId.from_bytes(raw), stream=stream, timeout=limit)

    # -- identity ----------------------------------------------------------------

    @property
    def rank(self) -> int:
        if self._rank is None:
            self._rank = int(call("ncclCommUserRank", self._nb.comm_user_rank, self._live("ncclCommUserRank")))
        return self._rank

    @property
    def nranks(self) -> int:
        if self._nranks is None:
            self._nranks = int(call("ncclCommCount", self._nb.comm_count, self._live("ncclCommCount")))
        return self._nranks

    @property
    def closed(self) -> bool:
        return self._comm is None

    @property
    def handle(self) -> int:
        """The ncclComm_t address (for other NCCL bindings)."""
        return int(self._live("Communicator.handle").handle)

    def __repr__(self) -> str:
        state = "closed" if self._comm is None else f"rank {self._rank_text()} of {self._nranks or '?'}"
        return f"<nccl.Communicator {state} on cuda:{self._ordinal}>"

    def _rank_text(self) -> str:
        return "?" if self._rank is None else str(self._rank)

    # -- collectives (hot) -------------------------------------------------------
    # Each checks its buffers in one expression and diagnoses (raises) only when it fails; the
    # stream handle of the communicator's own stream is cached; after queuing, one
    # ncclCommGetAsyncError tells whether NCCL is still enqueuing (then _settle waits).
    # One helper doing the whole launch (`fn(*args, comm, h)`) was tried: slower per call over a no-op
    # binding (the `_issued` call alone added to it), so each collective keeps its own launch.

    def all_reduce(self, send: DeviceBuf, recv: DeviceBuf | None = None, *, op: ReduceOp | str = "sum",
                   stream: Stream | None = None) -> None:
        """recv = op over ranks of send (ncclAllReduce); same size and dtype on every rank."""
        name = "ncclAllReduce"
        if recv is None:
            recv = send
        o = self._ordinal
        if (send.__class__ is not DeviceBuf or recv.__class__ is not DeviceBuf or send.ptr is None or recv.ptr is None
                or send._ordinal != o or recv._ordinal != o or send.dtype is not recv.dtype or send.size != recv.size):
            self._same(send, recv, name)
        dt, k, code = reduce_args(send.dtype, op, name)
        h = self._sh if stream is None and self.stream._h is not CLOSED else self._stream_handle(stream, name)
        comm = self._comm
        if comm is None:
            raise closed(name, "communicator")
        try:
            self._nb.all_reduce(send.ptr, recv.ptr, send.size * k, dt, code, comm, h)
        except Exception as exc:
            raise translate(name, exc, comm) from None
        self._issued(name, comm)

    def all_gather(self, send: DeviceBuf, recv: DeviceBuf, *, stream: Stream | None = None) -> None:
        """recv = the send buffers of ranks 0..n-1 end to end (ncclAllGather); recv has nranks x send.size."""
        name = "ncclAllGather"
        o = self._ordinal
        if (send.__class__ is not DeviceBuf or recv.__class__ is not DeviceBuf or send.ptr is None or recv.ptr is None
                or send._ordinal != o or recv._ordinal != o or send.dtype is not recv.dtype
                or recv.size != send.size * self.nranks):
            self._bufs(send, recv, name)
            if recv.size != send.size * self.nranks:
                raise invalid(name, f"recv must hold nranks x send.size = {self.nranks} x {send.size} "
                              f"elements, it holds {recv.size}")
        dt, k = MOVES[send.dtype]
        h = self._sh if stream is None and self.stream._h is not CLOSED else self._stream_handle(stream, name)
        comm = self._comm
        if comm is None:
            raise closed(name, "communicator")
        try:
            self._nb.all_gather(send.ptr, recv.ptr, send.size * k, dt, comm, h)
        except Exception as exc:
            raise translate(name, exc, comm) from None
        self._issued(name, comm)

    def reduce_scatter(self, send: DeviceBuf, recv: DeviceBuf, *, op: ReduceOp | str = "sum",
                       stream: Stream | None = None) -> None:
        """recv = block `rank` of op over ranks of send (ncclReduceScatter); send has nranks x recv.size."""
        name = "ncclReduceScatter"
        o = self._ordinal
        if (send.__class__ is not DeviceBuf or recv.__class__ is not DeviceBuf or send.ptr is None or recv.ptr is None
                or send._ordinal != o or recv._ordinal != o or send.dtype is not recv.dtype
                or send.size != recv.size * self.nranks):
            self._bufs(send, recv, name)
            if send.size != recv.size * self.nranks:
                raise invalid(name, f"send must hold nranks x recv.size = {self.nranks} x {recv.size} "
                              f"elements, it holds {send.size}")
        dt, k, code = reduce_args(send.dtype, op, name)
        h = self._sh if stream is None and self.stream._h is not CLOSED else self._stream_handle(stream, name)
        comm = self._comm
        if comm is None:
            raise closed(name, "communicator")
        try:
            self._nb.reduce_scatter(send.ptr, recv.ptr, recv.size * k, dt, code, comm, h)
        except Exception as exc:
            raise translate(name, exc, comm) from None
        self._issued(name, comm)

    def broadcast(self, send: DeviceBuf, recv: DeviceBuf | None = None, *, root: int = 0,
                  stream: Stream | None = None) -> None:
        """recv = root's send on every rank (ncclBroadcast); send is read on root only."""
        name = "ncclBroadcast"
        if recv is None:
            recv = send
        o = self._ordinal
        if (send.__class__ is not DeviceBuf or recv.__class__ is not DeviceBuf or send.ptr is None or recv.ptr is None
                or send._ordinal != o or recv._ordinal != o or send.dtype is not recv.dtype or send.size != recv.size):
            self._same(send, recv, name)
        if root.__class__ is not int or not 0 <= root < self.nranks:
            self._peer(root, "root", name)
        dt, k = MOVES[send.dtype]
        h = self._sh if stream is None and self.stream._h is not CLOSED else self._stream_handle(stream, name)
        comm = self._comm
        if comm is None:
            raise closed(name, "communicator")
        try:
            self._nb.broadcast(send.ptr, recv.ptr, send.size * k, dt, root, comm, h)
        except Exception as exc:
            raise translate(name, exc, comm) from None
        self._issued(name, comm)

    def reduce(self, send: DeviceBuf, recv: DeviceBuf | None = None, *, op: ReduceOp | str = "sum", root: int = 0,
               stream: Stream | None = None) -> None:
        """On root, recv = op over ranks of send (ncclReduce); recv is written on root only."""
        name = "ncclReduce"
        if recv is None:
            recv = send
        o = self._ordinal
        if (send.__class__ is not DeviceBuf or recv.__class__ is not DeviceBuf or send.ptr is None or recv.ptr is None
                or send._ordinal != o or recv._ordinal != o or send.dtype is not recv.dtype or send.size != recv.size):
            self._same(send, recv, name)
        if root.__class__ is not int or not 0 <= root < self.nranks:
            self._peer(root, "root", name)
        dt, k, code = reduce_args(send.dtype, op, name)
        h = self._sh if stream is None and self.stream._h is not CLOSED else self._stream_handle(stream, name)
        comm = self._comm
        if comm is None:
            raise closed(name, "communicator")
        try:
            self._nb.reduce(send.ptr, recv.ptr, send.size * k, dt, code, root, comm, h)
        except Exception as exc:
            raise translate(name, exc, comm) from None
        self._issued(name, comm)

    def send(self, buf: DeviceBuf, peer: int, *, stream: Stream | None = None) -> None:
        """Send buf to rank `peer`, which posts a recv of the same size (ncclSend; pair them in a group)."""
        self._p2p("ncclSend", self._nb.send, buf, peer, stream)

    def recv(self, buf: DeviceBuf, peer: int, *, stream: Stream | None = None) -> None:
        """Receive into buf what rank `peer` sends (ncclRecv)."""
        self._p2p("ncclRecv", self._nb.recv, buf, peer, stream)

    def _p2p(self, name: str, fn: Any, buf: Any, peer: Any, stream: Any) -> None:
        kind = buf.__class__
        if kind is not DeviceBuf or buf.ptr is None or buf._ordinal != self._ordinal:
            self._buf(buf, "buf", name)
        if peer.__class__ is not int or not 0 <= peer < self.nranks:
            self._peer(peer, "peer", name)
        dt, k = MOVES[buf.dtype]
        h = self._sh if stream is None and self.stream._h is not CLOSED else self._stream_handle(stream, name)
        comm = self._comm
        if comm is None:
            raise closed(name, "communicator")
        try:
            fn(buf.ptr, buf.size * k, dt, peer, comm, h)
        except Exception as exc:
            raise translate(name, exc, comm) from None
        self._issued(name, comm)

    def _issued(self, name: str, comm: Any) -> None:
        """After queuing `name`: settle at the end of the group this thread is in, or now if NCCL is still enqueuing."""
        if _open_groups and _tls.depth:
            _tls.pending.setdefault(self, name)
        elif self._nb.comm_get_async_error(comm):
            _settle({self: name})

    # -- argument checks (hot, then cold diagnostics) ---------------------------

    def _buf(self, buf: Any, what: str, name: str) -> None:
        b: Any = buf
        if not isinstance(buf, DeviceBuf):
            raise invalid(name, f"{what} must be a DeviceBuf, got {type(buf).__name__}")
        if b.ptr is None:
            raise closed(name, f"{what} buffer")
        if b._ordinal != self._ordinal:
            raise invalid(name, f"{what} is on cuda:{b._ordinal}, the communicator on cuda:{self._ordinal}")

    def _bufs(self, send: Any, recv: Any, name: str) -> None:
        self._buf(send, "send", name)
        self._buf(recv, "recv", name)
        if send.dtype is not recv.dtype:
            raise invalid(name, f"send is {send.dtype.value}, recv {recv.dtype.value}; dtypes must match")

    def _same(self, send: Any, recv: Any, name: str) -> None:
        self._bufs(send, recv, name)
        if send.size != recv.size:
            raise invalid(name, f"send has {send.size} elements, recv {recv.size}; sizes must match")

    def _peer(self, value: Any, what: str, name: str) -> None:
        _int_arg(value, what, name)
        if not 0 <= value < self.nranks:
            raise invalid(name, f"{what} {value} is out of range for {self.nranks} rank(s)")

    def _stream_handle(self, stream: Any, name: str) -> int:
        s: Any = _stream_arg(self.stream if stream is None else stream, self.device, name)
        return int(s._h)

    def _live(self, op: str) -> Any:
        comm = self._comm
        if comm is None:
            raise closed(op, "communicator")
        return comm

    # -- split, registration -------------------------------------------------------

    def split(self, color: int | None, key: int = 0, *, timeout: float | None = None) -> Communicator | None:
        """Collective over this communicator: the ranks that pass the same color form a new one (ncclCommSplit).

        Ranks order by `key`, then by rank here; `color=None` takes no part (returns None).  The
        new communicator inherits the device, stream and, unless given, the timeout.  One process
        with several communicators splits them all inside one `nccl.group()`.
        """
        op = "ncclCommSplit"
        comm = self._live(op)
        if color is None:
            code = SPLIT_NOCOLOR
        else:
            code = _int_arg(color, "color", op)
            if code < 0:
                raise invalid(op, f"color must be a non-negative int or None, got {color}")
        key = _int_arg(key, "key", op)
        limit = self.timeout if timeout is None else _timeout_arg(timeout, op)
        out = call(op, self._nb.comm_split, comm, code, key, 0)
        child: Communicator | None = None
        if color is not None:  # `out` is the Comm whose handle NCCL fills in when the split completes
            child = object.__new__(Communicator)
            child._setup(self._nb, self.device, self.stream, limit, None, None)
            child._comm = _as_comm(self._nb, out)
            child._parent = self
        entries: dict[Communicator, str] = {self: op}
        if child is not None:
            entries[child] = op
        if _in_group():
            for c, o in entries.items():
                _defer(c, o)
        else:
            _settle(entries)
        return child

    def register(self, buf: DeviceBuf) -> Registration:
        """Register buf with this communicator for zero-copy transfers (ncclCommRegister); close() deregisters.

        NCCL uses registered buffers where its transports can (memory from `nccl.alloc` qualifies
        for the most); collectives on them need no other change.
        """
        op = "ncclCommRegister"
        comm = self._live(op)
        self._buf(buf, "buf", op)
        if _in_group():
            raise invalid(op, "register buffers outside nccl.group(): inside one NCCL fills in the handle later")
        handle = call(op, self._nb.comm_register, comm, buf.ptr, buf.nbytes)
        reg = Registration._make(self, buf, int(handle))
        self._registrations.add(reg)
        self._issued(op, comm)
        return reg

    # -- waiting, aborting, closing -----------------------------------------------

    def synchronize(self, stream: Stream | None = None, timeout: float | None = None) -> None:
        """Wait until work queued on `stream` (default: the communicator's) is done, at most `timeout` s.

        Polls an event and ncclCommGetAsyncError.  A peer that never joins makes NCCL's kernels
        wait forever: past the deadline (default: the communicator's timeout) the communicator is
        aborted, which ends them, and CollectiveTimeout is raised.
        """
        name = "Communicator.synchronize"
        comm = self._live(name)
        h = self._stream_handle(stream, name)
        limit = self.timeout if timeout is None else _timeout_arg(timeout, name)
        event = self._event
        if event is None:
            event = self._event = self.device.create_event()
        event.record(stream if stream is not None else self.stream)
        deadline = None if limit is None else time.monotonic() + limit
        polls = 0
        while True:
            done = event.query()
            state = self._nb.comm_get_async_error(comm)
            if state not in (SUCCESS, IN_PROGRESS):
                error = nccl_error(name, int(state), comm, note="reported asynchronously; the communicator was aborted")
                self._abort_quietly()
                raise error
            if done and state == SUCCESS:
                return
            if deadline is not None and time.monotonic() >= deadline:
                self._abort_quietly()
                raise CollectiveTimeout(BACKEND, name, detail=(
                    f"work on stream {h:#x} did not finish within {limit} s on rank {self._rank_text()}: a peer is "
                    "missing or hung; the communicator was aborted"))
            polls += 1
            _pause(polls)

    def abort(self) -> None:
        """Abort now (ncclCommAbort): queued and running operations end, results are undefined.  Idempotent."""
        comm = self._comm
        if comm is None:
            return
        self._forget()
        call("ncclCommAbort", self._nb.comm_abort, comm)

    def _abort_quietly(self) -> None:
        try:
            self.abort()
        except Exception:
            pass

    def _forget(self) -> None:
        self._comm = None
        self._registrations = weakref.WeakSet()
        event, self._event = self._event, None
        if event is not None:
            try:
                event.close()
            except Exception:
                pass

    def close(self) -> None:
        """Finalize and destroy (ncclCommFinalize, ncclCommDestroy), waiting for queued work.  Idempotent.

        Several communicators of one process close together with `nccl.close_all`.
        """
        close_all([self])

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._comm is not None and not _driver.forked:
                self._abort_quietly()  # forgotten: never wait for peers during garbage collection
        except Exception:  # interpreter shutdown, or never initialised
            pass


def close_all(comms: Iterable[Communicator]) -> None:
    """Close several communicators together: finalize all, wait for all, then destroy all.

    Needed for the communicators of one process that drives several GPUs, whose finalization
    completes only together.
    """
    op = "ncclCommFinalize"
    if isinstance(comms, Communicator) or not isinstance(comms, Iterable):
        raise invalid("close_all", f"expected an iterable of Communicators, got {type(comms).__name__}")
    live = []
    for c in comms:
        if not isinstance(c, Communicator):
            raise invalid("close_all", f"expected Communicators, got {type(c).__name__}")
        if c._comm is not None:
            live.append(c)
    if not live:
        return
    nb = binding()
    errors: list[Exception] = []
    for c in live:
        for reg in list(c._registrations):
            try:
                reg.close()
            except Exception as exc:
                errors.append(exc)
    entries: dict[Communicator, str] = {}
    for c in live:
        try:
            nb.comm_finalize(c._comm)
            entries[c] = op
        except Exception as exc:
            errors.append(translate(op, exc, c._comm))
            c._abort_quietly()
    try:
        _settle(entries)
    except Exception as exc:
        errors.append(exc)
    for c in live:
        comm = c._comm
        if comm is None:
            continue
        c._forget()
        try:
            nb.comm_destroy(comm)
        except Exception as exc:
            errors.append(translate("ncclCommDestroy", exc))
    if errors:
        raise errors[0]


class Registration:
    """A buffer registered with a communicator (ncclCommRegister).  `close()` deregisters; idempotent."""

    __slots__ = ("communicator", "buffer", "_handle", "__weakref__")
    communicator: Communicator
    buffer: DeviceBuf
    _handle: int | None

    def __init__(self) -> None:
        raise TypeError("register buffers with Communicator.register()")

    @classmethod
    def _make(cls, comm: Communicator, buf: DeviceBuf, handle: int) -> Registration:
        reg = object.__new__(cls)
        reg.communicator = comm
        reg.buffer = buf
        reg._handle = handle
        return reg

    @property
    def closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle is None:
            return
        comm = self.communicator
        h = comm._comm
        comm._registrations.discard(self)
        if h is not None:  # an aborted or closed communicator has dropped its registrations itself
            call("ncclCommDeregister", comm._nb.comm_deregister, h, handle)

    def __enter__(self) -> Registration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None and not _driver.forked:
            try:
                self.close()
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"<nccl.Registration {'closed' if self._handle is None else hex(self._handle)} of {self.buffer!r}>"


def alloc(device: Device | int, size: int, dtype: Any = "uint8") -> DeviceBuf:
    """`size` elements from ncclMemAlloc (cuMem memory that NCCL's transports can register and map).

    A DeviceBuf like any other; closing it synchronizes the device, then frees (ncclMemFree).
    """
    op = "ncclMemAlloc"
    dev = _device_arg(device, op)
    dt, size, nbytes = element_count(dev, size, dtype, op, dev.total_memory)
    nb = binding()
    owner = Device._internal(dev._state)  # a handle the caller cannot close before the buffer is freed
    owner.bind()  # ncclMemAlloc allocates on the calling thread's current device
    ptr = int(call(op, nb.mem_alloc, nbytes))

    def release() -> None:
        if _driver.forked:
            return
        owner.synchronize()  # cuMem memory is unmapped at once: nothing may still use it
        call("ncclMemFree", nb.mem_free, ptr)
        owner.bind()  # ncclMemFree restores the runtime's current device, maybe not the context we had

    return adopt(ptr, size, dt, dev, release=release)


def _as_comm(nb: Any, out: Any) -> Any:
    """The binding's Comm for what comm_init_rank_config / comm_split returned (a Comm or its address)."""
    if isinstance(out, nb.Comm):
        return out
    return nb.Comm(int(out))

