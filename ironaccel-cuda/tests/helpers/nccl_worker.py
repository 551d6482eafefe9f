"""One rank of a process-per-GPU NCCL test, started by nccl_checks.launch with torchrun-style variables.

    python nccl_worker.py collectives   # every collective checked against numpy, then split; prints "ok"
    python nccl_worker.py hang          # rank 0 all-reduces alone: it must time out and abort; the others idle
    python nccl_worker.py init-timeout  # rank 0 of a two-rank communicator whose rank 1 never comes
    python nccl_worker.py hang-one-process  # one process, GPUs 0 and 1: rank 0 all-reduces alone

Exits 0 when its checks passed; the last line says what happened.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
from nccl_checks import HANG_TIMEOUT, exercise, exercise_split

import ironaccel_cuda as cu
from ironaccel_cuda import nccl


def collectives() -> str:
    comm = nccl.Communicator.from_env(timeout=120)
    world = int(os.environ["WORLD_SIZE"])
    assert comm.rank == int(os.environ["RANK"]) and comm.nranks == world, (comm.rank, comm.nranks)
    assert comm.device.ordinal == int(os.environ["LOCAL_RANK"])
    done = exercise([comm], world)
    exercise_split([comm], world)
    comm.close()
    return f"ok rank {comm.rank}: {len(done)} cases + split"


def hang() -> str:
    comm = nccl.Communicator.from_env(timeout=120)
    buf = comm.device.alloc(1 << 20, "float32")
    buf.memset(0)
    comm.all_reduce(buf)  # every rank: connections are made, then the one-sided call below hangs on the GPU
    comm.synchronize()
    if comm.rank != 0:
        time.sleep(HANG_TIMEOUT + 10)  # rank 0 waits for us in vain, times out and aborts
        comm.abort()
        return f"ok rank {comm.rank}: idled, aborted"
    start = time.monotonic()
    try:
        comm.all_reduce(buf)
        comm.synchronize(timeout=HANG_TIMEOUT)
    except nccl.CollectiveTimeout as exc:
        elapsed = time.monotonic() - start
        assert comm.closed, "the communicator must be aborted after a timeout"
        return f"ok rank 0: timed out after {elapsed:.1f} s ({exc.op})"
    raise AssertionError("a one-sided all-reduce completed")


def hang_one_process() -> str:
    devs = [cu.Device(0), cu.Device(1)]
    comms = nccl.Communicator.init_all(devs, timeout=120)
    bufs = [d.alloc(1 << 20, "float32") for d in devs]
    for b in bufs:
        b.memset(0)
    with nccl.group():  # connections are made for this size; then rank 0 goes alone
        for c, b in zip(comms, bufs):
            c.all_reduce(b)
    for c in comms:
        c.synchronize()
    start = time.monotonic()
    try:
        comms[0].all_reduce(bufs[0])
        comms[0].synchronize(timeout=HANG_TIMEOUT)
    except nccl.CollectiveTimeout as exc:
        elapsed = time.monotonic() - start
        assert comms[0].closed, "the communicator must be aborted after a timeout"
        comms[1].abort()
        return f"ok rank 0: timed out after {elapsed:.1f} s ({exc.op})"
    raise AssertionError("a one-sided all-reduce completed")


def init_timeout() -> str:
    dev = cu.Device(int(os.environ.get("LOCAL_RANK", "0")))
    start = time.monotonic()
    try:
        nccl.Communicator(dev, 2, 0, nccl.UniqueId.new(), timeout=HANG_TIMEOUT)
    except nccl.CollectiveTimeout as exc:
        elapsed = time.monotonic() - start
        return f"ok: init timed out after {elapsed:.1f} s ({exc.op}): {exc}"
    raise AssertionError("a two-rank communicator initialised with one rank")


def main() -> None:
    mode = sys.argv[1]
    np.seterr(all="raise")
    modes = {"collectives": collectives, "hang": hang, "hang-one-process": hang_one_process,
             "init-timeout": init_timeout}
    line = modes[mode]()
    print(line, flush=True)
    os._exit(0)  # NCCL's bootstrap threads of an aborted init may still wait on sockets: do not join them


if __name__ == "__main__":
    main()
