"""Every NCCL collective on this process's communicators, checked against numpy; and a launcher of workers.

`exercise(comms, world)` takes the communicators this process holds (one in the process-per-GPU
model, all of them when one process drives several GPUs) and issues each step for all of them in
one `nccl.group()`, the way NCCL requires for one thread and several GPUs.  Rank r contributes
data that depends on r, so a wrong count, offset, root, dtype or reduction shows up in the result.
`launch(n, mode)` starts n copies of nccl_worker.py as torchrun would (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT) with NVLink multicast off.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ironaccel import DType

WORKER = Path(__file__).with_name("nccl_worker.py")
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
COUNT = 1000  # not a multiple of anything NCCL chunks by
HANG_TIMEOUT = float(os.environ.get("IRONACCEL_TEST_HANG_TIMEOUT", "5"))  # seconds the hung-peer tests allow


def rank_data(rank: int, count: int, dtype: Any, kind: str = "small") -> np.ndarray:
    """Rank-dependent values that every reduction keeps exact: small integers, or 1s and 2s for products."""
    i = np.arange(count)
    values = 1 + (i + rank) % 2 if kind == "prod" else (i * 3 + rank * 5) % 7 + rank % 3
    if np.dtype(dtype).kind == "c":
        return (values + 1j * (values % 3 + rank)).astype(dtype)
    return values.astype(dtype)


def _np(dtype: str) -> np.dtype | None:
    try:
        return DType.of(dtype).numpy
    except TypeError:  # bfloat16 without ml_dtypes
        return None


REDUCTIONS = [  # (dtype, op, data kind)
    ("float32", "sum", "small"), ("float32", "prod", "prod"), ("float32", "max", "small"), ("float32", "min", "small"),
    ("float32", "avg", "small"), ("float64", "sum", "small"), ("float16", "sum", "small"), ("bfloat16", "sum", "small"),
    ("int32", "sum", "small"), ("int32", "max", "small"), ("int64", "sum", "small"), ("uint8", "sum", "small"),
    ("int8", "min", "small"), ("uint32", "prod", "prod"), ("uint64", "max", "small"), ("complex64", "sum", "small"),
    ("complex128", "avg", "small"),
]
MOVES = ["float32", "float64", "int16", "bool", "bfloat16", "complex64", "uint8"]


def _expected(stack: np.ndarray, op: str) -> np.ndarray:
    wide = stack.astype(np.complex128 if stack.dtype.kind == "c" else np.float64)
    result = {"sum": wide.sum(0), "prod": wide.prod(0), "max": wide.max(0), "min": wide.min(0),
              "avg": wide.mean(0)}[op]
    return result


def _check(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if got.dtype.kind in "fc" or got.dtype.name == "bfloat16":
        np.testing.assert_allclose(got.astype(want.dtype), want, rtol=1e-5, atol=1e-6, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=what)


def _upload(comm: Any, host: np.ndarray) -> Any:
    buf = comm.device.alloc(host.size, host.dtype)
    buf.copy_from(np.ascontiguousarray(host))
    return buf


def _poisoned(comm: Any, count: int, npdt: np.dtype) -> Any:
    """A buffer full of 0x5A bytes: whatever a collective fails to write stays visible."""
    buf = comm.device.alloc(count, npdt)
    buf.copy_from(np.frombuffer(b"\x5a" * (count * npdt.itemsize), dtype=npdt))
    return buf


def _sync(comms: list[Any]) -> None:
    for c in comms:
        c.synchronize()


def exercise(comms: list[Any], world: int) -> list[str]:
    """Run and check all_reduce, all_gather, reduce_scatter, broadcast, reduce and send/recv; the cases run."""
    from ironaccel_cuda import nccl

    done: list[str] = []
    for dtype, op, kind in REDUCTIONS:
        npdt = _np(dtype)
        if npdt is None:
            continue
        stack = np.stack([rank_data(r, COUNT, npdt, kind) for r in range(world)])
        want = _expected(stack, op)
        sends = [_upload(c, stack[c.rank]) for c in comms]
        outs = [_poisoned(c, COUNT, npdt) for c in comms]
        ins = [_upload(c, stack[c.rank]) for c in comms]  # in place
        with nccl.group():
            for c, s, o, i in zip(comms, sends, outs, ins):
                c.all_reduce(s, o, op=op)
                c.all_reduce(i, op=nccl.ReduceOp(op))
        _sync(comms)
        for c, s, o, i in zip(comms, sends, outs, ins):
            _check(o.copy_to_host(), want, f"all_reduce {dtype} {op} rank {c.rank}")
            _check(i.copy_to_host(), want, f"all_reduce in place {dtype} {op} rank {c.rank}")
            _check(s.copy_to_host(), stack[c.rank].astype(want.dtype), f"all_reduce left send alone {dtype}")
            for b in (s, o, i):
                b.close()
        done.append(f"all_reduce {dtype} {op}")

    for dtype in MOVES:
        npdt = _np(dtype)
        if npdt is None:
            continue
        stack = np.stack([rank_data(r, COUNT, npdt) for r in range(world)])
        # all_gather: rank r's block at r * COUNT
        sends = [_upload(c, stack[c.rank]) for c in comms]
        outs = [_poisoned(c, COUNT * world, npdt) for c in comms]
        with nccl.group():
            for c, s, o in zip(comms, sends, outs):
                c.all_gather(s, o)
        _sync(comms)
        for c, o in zip(comms, outs):
            np.testing.assert_array_equal(o.copy_to_host(), stack.reshape(-1), err_msg=f"all_gather {dtype} {c.rank}")
        # broadcast from the last rank, out of place and in place
        root = world - 1
        bouts = [_poisoned(c, COUNT, npdt) for c in comms]
        with nccl.group():
            for c, s, o in zip(comms, sends, bouts):
                c.broadcast(s, o, root=root)
        _sync(comms)
        for c, o in zip(comms, bouts):
            np.testing.assert_array_equal(o.copy_to_host(), stack[root], err_msg=f"broadcast {dtype} rank {c.rank}")
        with nccl.group():
            for c, s in zip(comms, sends):
                c.broadcast(s, root=0)
        _sync(comms)
        for c, s in zip(comms, sends):
            np.testing.assert_array_equal(s.copy_to_host(), stack[0], err_msg=f"broadcast in place {dtype} {c.rank}")
        for b in (*sends, *outs, *bouts):
            b.close()
        done.append(f"all_gather + broadcast {dtype}")

    for dtype, op in (("float32", "sum"), ("int32", "max"), ("float64", "min"), ("complex64", "sum")):
        npdt = np.dtype(dtype)
        stack = np.stack([rank_data(r, COUNT * world, npdt) for r in range(world)])
        want = _expected(stack, op)
        sends = [_upload(c, stack[c.rank]) for c in comms]
        outs = [_poisoned(c, COUNT, npdt) for c in comms]
        with nccl.group():
            for c, s, o in zip(comms, sends, outs):
                c.reduce_scatter(s, o, op=op)
        _sync(comms)
        for c, o in zip(comms, outs):
            _check(o.copy_to_host(), want[c.rank * COUNT:(c.rank + 1) * COUNT], f"reduce_scatter {dtype} {op}")
        for b in (*sends, *outs):
            b.close()
        done.append(f"reduce_scatter {dtype} {op}")

    for dtype, op, root in (("float32", "sum", 0), ("int64", "max", world - 1), ("float16", "sum", world // 2)):
        npdt = np.dtype(dtype)
        stack = np.stack([rank_data(r, COUNT, npdt) for r in range(world)])
        want = _expected(stack, op)
        sends = [_upload(c, stack[c.rank]) for c in comms]
        outs = [_poisoned(c, COUNT, npdt) for c in comms]
        with nccl.group():
            for c, s, o in zip(comms, sends, outs):
                c.reduce(s, o, op=op, root=root)
        _sync(comms)
        for c, o in zip(comms, outs):
            if c.rank == root:
                _check(o.copy_to_host(), want, f"reduce {dtype} {op} to {root}")
        for b in (*sends, *outs):
            b.close()
        done.append(f"reduce {dtype} {op} root {root}")

    # send/recv around the ring: rank r sends to r+1 and receives from r-1 (itself when alone)
    for dtype in ("float32", "int16"):
        npdt = np.dtype(dtype)
        stack = np.stack([rank_data(r, COUNT, npdt) for r in range(world)])
        sends = [_upload(c, stack[c.rank]) for c in comms]
        outs = [_poisoned(c, COUNT, npdt) for c in comms]
        with nccl.group():
            for c, s, o in zip(comms, sends, outs):
                c.send(s, (c.rank + 1) % world)
                c.recv(o, (c.rank - 1) % world)
        _sync(comms)
        for c, o in zip(comms, outs):
            np.testing.assert_array_equal(o.copy_to_host(), stack[(c.rank - 1) % world], err_msg=f"send/recv {dtype}")
        for b in (*sends, *outs):
            b.close()
        done.append(f"send/recv {dtype}")
    return done


def exercise_split(comms: list[Any], world: int) -> None:
    """Split by parity of rank (key: reversed order) and all-reduce within each half."""
    from ironaccel_cuda import nccl

    with nccl.group():
        subs = [c.split(c.rank % 2, key=world - c.rank) for c in comms]
    for c, s in zip(comms, subs):
        members = [r for r in range(world) if r % 2 == c.rank % 2]
        assert s is not None and s.nranks == len(members)
        assert s.rank == sorted(members, reverse=True).index(c.rank), (c.rank, s.rank)
    bufs = [_upload(s, np.full(16, c.rank + 1, np.float32)) for c, s in zip(comms, subs)]
    with nccl.group():
        for s, b in zip(subs, bufs):
            s.all_reduce(b)
    _sync(subs)
    for c, b in zip(comms, bufs):
        members = [r for r in range(world) if r % 2 == c.rank % 2]
        np.testing.assert_array_equal(b.copy_to_host(), np.full(16, sum(r + 1 for r in members), np.float32))
        b.close()
    with nccl.group():
        none = [c.split(None) for c in comms]
    assert none == [None] * len(comms)
    nccl.close_all(subs)


# -- launching one process per GPU ------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(n: int, mode: str, *, timeout: float = 300, extra_env: dict[str, str] | None = None
           ) -> list[subprocess.CompletedProcess]:
    """Start n workers (nccl_worker.py MODE), ranks 0..n-1 on GPUs 0..n-1; wait for all; their results by rank."""
    env = dict(os.environ, **NO_MULTICAST, WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               IRONACCEL_NCCL_PORT=str(free_port()), PYTHONUNBUFFERED="1", **(extra_env or {}))
    procs = []
    for rank in range(n):
        child = dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([sys.executable, str(WORKER), mode], env=child, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += f"\n[killed after {timeout} s]"
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, ""))
    return results
