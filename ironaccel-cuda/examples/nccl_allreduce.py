"""All-reduce across N processes, one per GPU, with ironaccel-cuda's NCCL layer; checked against numpy.

    python examples/nccl_allreduce.py                          # one process per GPU of this machine
    python examples/nccl_allreduce.py -n 1                     # one process, one GPU
    torchrun --nproc-per-node=2 examples/nccl_allreduce.py     # or let torchrun start the processes

Run without RANK in the environment, this script is the launcher: it starts N copies of itself with
the variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and with
NCCL_NVLS_ENABLE=0 -- NVLink multicast stays off, because on shared multi-GPU hosts it can take the
GPUs out of service.  Each copy creates its communicator from those variables: rank 0 hands the
NCCL unique id to the others over TCP (port IRONACCEL_NCCL_PORT, else MASTER_PORT + 1).
Needs `pip install 'ironaccel-cuda[nccl]'`.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys

import numpy as np

N = 1 << 20


def contribution(rank: int) -> np.ndarray:
    return np.random.default_rng(rank).standard_normal(N).astype(np.float32)


def worker() -> None:
    from ironaccel_cuda import nccl

    comm = nccl.Communicator.from_env(timeout=120)  # RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
    buf = comm.device.alloc(N, "float32")
    buf.copy_from(contribution(comm.rank))
    comm.all_reduce(buf)  # in place, sum over the ranks, on comm.stream
    comm.synchronize()
    expected = np.sum([contribution(r) for r in range(comm.nranks)], axis=0, dtype=np.float64)
    np.testing.assert_allclose(buf.copy_to_host(), expected, rtol=1e-5, atol=1e-5)
    print(f"rank {comm.rank} of {comm.nranks} on {comm.device.name} (cuda:{comm.device.ordinal}): all-reduce of "
          f"{N} float32 matches numpy", flush=True)
    buf.close()
    comm.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(n: int) -> int:
    env = dict(os.environ, WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               IRONACCEL_NCCL_PORT=str(free_port()), NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               NVSHMEM_DISABLE_NVLS="1")
    script = os.path.abspath(__file__)
    procs = [subprocess.Popen([sys.executable, script], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(n)]
    codes = [p.wait() for p in procs]
    if any(codes):
        print(f"nccl all-reduce FAILED: exit codes {codes}", file=sys.stderr)
        return 1
    print(f"nccl all-reduce ok on {n} GPU(s)")
    return 0


def main() -> int:
    if "RANK" in os.environ:
        worker()
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--nprocs", type=int, default=None, help="processes (GPUs); default: all GPUs")
    args = parser.parse_args()
    n = args.nprocs
    if n is None:
        import ironaccel_cuda as cu

        n = cu.device_count()
    if n < 1:
        parser.error("needs at least one process")
    return launch(n)


if __name__ == "__main__":
    sys.exit(main())
