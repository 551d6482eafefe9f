"""NCCL collectives on ironaccel's DeviceBufs and Streams, through NVIDIA's nccl4py binding.

    from ironaccel_cuda import nccl
    comm = nccl.Communicator.from_env()                     # one process per GPU: torchrun, mpirun, srun
    comm = nccl.Communicator.from_store(store, rank, n)     # a torch.distributed Store, or any set/get object
    comm = nccl.Communicator.from_mpi()                     # mpi4py's COMM_WORLD (or pass a communicator)
    comm.all_reduce(buf)                                    # in place, sum, on comm.stream
    comm.synchronize()                                      # or record an Event and wait on it

    comms = nccl.Communicator.init_all([0, 1])              # one process, several GPUs
    with nccl.group():                                      # one group per step for all of them
        for c, b in zip(comms, bufs):
            c.all_reduce(b)

Install with `pip install 'ironaccel-cuda[nccl]'` (nccl4py and nvidia-nccl-cu13); without them the
first call raises NotAvailable naming what is missing.  Importing this module loads nothing.

NVLink SHARP (multicast) stays off: the first use sets NCCL_NVLS_ENABLE=0 unless the environment
already sets it, because on shared multi-GPU hosts multicast can take the GPUs out of service.
"""

from __future__ import annotations

from ._binding import CollectiveTimeout, version
from ._comm import (
    DEFAULT_TIMEOUT,
    Communicator,
    ReduceOp,
    Registration,
    UniqueId,
    alloc,
    close_all,
    group,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "CollectiveTimeout",
    "Communicator",
    "ReduceOp",
    "Registration",
    "UniqueId",
    "alloc",
    "close_all",
    "group",
    "version",
]
