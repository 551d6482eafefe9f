"""Ranks in separate processes bootstrapping NCCL communicators through a store and the launcher's environment.

    python nccl_bootstrap_worker.py N   # N ranks, one process each; prints one "rank R: ..." line per rank

The parent holds a multiprocessing Manager dict; every rank wraps it in the store protocol
(set/get) and creates three communicators: `from_store` with the default key, `from_store` with
an explicit key, and `from_env` with the launcher's variables (RANK, WORLD_SIZE, MASTER_*) over the
TCP fallback.  Each all-reduces or broadcasts and checks the result, then closes.  Run under the
fake libcuda and the fake NCCL with FAKE_NCCL_SHARED_DIR (collectives/test_nccl_bootstrap.py) or on GPUs.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import sys
import traceback
from typing import Any


class DictStore:
    """The store protocol over a shared dict: a missing key raises KeyError, as dict does."""

    def __init__(self, shared: Any):
        self.shared = shared

    def set(self, key: str, value: bytes) -> None:
        self.shared[key] = bytes(value)

    def get(self, key: str) -> bytes:
        return self.shared[key]


def rank_main(rank: int, n: int, shared: Any, port: int, queue: Any) -> None:
    try:
        queue.put((rank, run(rank, n, shared, port)))
    except BaseException:
        queue.put((rank, "FAILED " + traceback.format_exc()))


def run(rank: int, n: int, shared: Any, port: int) -> str:
    import numpy as np

    from ironaccel_cuda import nccl

    ngpu = int(os.environ.get("BOOTSTRAP_GPUS", "1"))
    store = DictStore(shared)
    done = []

    comm = nccl.Communicator.from_store(store, rank, n, device=rank % ngpu, timeout=60)
    assert (comm.rank, comm.nranks) == (rank, n), (comm.rank, comm.nranks)
    buf = comm.device.alloc(4, "float32")
    buf.copy_from(np.full(4, rank + 1, np.float32))
    comm.all_reduce(buf)
    comm.synchronize()
    got = buf.copy_to_host()
    assert (got == n * (n + 1) / 2).all(), got
    done.append(f"from_store all_reduce {got[0]:g}")

    second = nccl.Communicator.from_store(store, rank, n, device=rank % ngpu, timeout=60, key="job/explicit")
    b = second.device.alloc(3, "int32")
    b.copy_from(np.full(3, 100 + rank, np.int32))
    second.broadcast(b, root=0)
    second.synchronize()
    assert (b.copy_to_host() == 100).all(), b.copy_to_host()
    done.append("keyed broadcast 100")

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank % ngpu), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port - 1), IRONACCEL_NCCL_PORT=str(port), IRONACCEL_NCCL_BOOTSTRAP="tcp")
    third = nccl.Communicator.from_env(timeout=60)
    assert (third.rank, third.nranks) == (rank, n)
    c = third.device.alloc(2, "float64")
    c.copy_from(np.array([rank, 1.0]))
    third.all_reduce(c, op="max")
    third.synchronize()
    assert list(c.copy_to_host()) == [n - 1, 1.0], c.copy_to_host()
    done.append("from_env (tcp) all_reduce max")
    for x in (comm, second, third):
        x.close()
    return "ok " + "; ".join(done)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    n = int(sys.argv[1])
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        shared = manager.dict()
        queue = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=rank_main, args=(r, n, shared, port, queue)) for r in range(n)]
        for p in procs:
            p.start()
        results = dict(queue.get(timeout=180) for _ in procs)
        for p in procs:
            p.join(30)
        for r in range(n):
            print(f"rank {r}: {results.get(r)}")
        keys = sorted(shared.keys())
        print("keys:", " ".join(keys))
    return 0 if all(str(results.get(r, "")).startswith("ok") for r in range(n)) else 1


if __name__ == "__main__":
    sys.exit(main())
