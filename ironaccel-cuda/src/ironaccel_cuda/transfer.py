"""How copies between pageable host memory and the device are staged (settings, read once per process).

The driver copies pageable memory through its own small staging buffer on one
thread, well below the page-locked rate (bench/experiments/pageable_alone.c
measures it).  ironaccel instead copies large pageable transfers through its
own page-locked slots: several threads copy host chunks into (or out of)
the slots while the DMA engine moves the previous chunks, so host copies and
PCIe transfers overlap.  Small pageable copies (compiled fast path
only) go through a page-locked bounce buffer and an async DMA.

A copy of N bytes is cut into chunks of about N/32 bytes (64 KiB to the slot
size): small enough that the first DMA starts soon after the copy begins and
the last host copy ends soon after the last DMA, large enough that issuing a
DMA per chunk keeps up with the copy engine.  The slots (page-locked memory,
made on a device's first large copy and kept for the life of the process)
cost `slots x chunk` bytes per device: 24 MiB by default with 12 threads.
The calling thread copies too whenever the chunk the DMA engine waits for is
still unclaimed, so a copy never waits for the workers to wake up to start.

Environment (read at the first large copy; `bench/sweep_transfer.py` measures them on a GPU):

* ``IRONACCEL_CUDA_COPY_THREADS``: copy threads (default: min(8, usable CPUs - 2), at least 1).  On the
  a host of 16 CPUs every count from 6 to 15 threads reached the same share of pinned bandwidth
  (bench/sweep_transfer.py): the host's memory, not the thread count, is the limit.
* ``IRONACCEL_CUDA_COPY_CHUNK``: slot size = largest chunk (default 512 KiB, a multiple of 4 KiB).
* ``IRONACCEL_CUDA_COPY_SLOTS``: page-locked slots per device (default 4 x threads, at least 8).
* ``IRONACCEL_CUDA_COPY_SPLIT``: a copy is cut into about this many chunks (default 32).
* ``IRONACCEL_CUDA_COPY_NT``: non-temporal stores (compiled path, x86-64): 1 into the slots (host to
  device), 2 into the host array (device to host), 3 both, 0 none (default 1).
* ``IRONACCEL_CUDA_PIPELINE_MIN``: smallest synchronous pageable copy that is staged (default 256 KiB).
* ``IRONACCEL_CUDA_BOUNCE_MAX``: largest pageable copy sent through the bounce buffer (default 64 KiB).
* ``IRONACCEL_CUDA_FENCE_SPIN_US``: how long a wait (a busy stream's synchronize, a copy's own wait, the
  bounce copies' included) spins on this thread's fence word (native/fence.h) before it asks
  cuStreamSynchronize to wait (default 200; 0: always cuStreamSynchronize).  A wait the word ends sees the
  work's end sooner; one that outlasts the spin pays for the write, a smaller cost
  (bench/experiments/ab_fence.py; a graph replay that outlasts a shorter spin lost next to nothing).
  200 us covers copies to a few MiB and short graphs; cuStreamSynchronize spins too under the default
  scheduling.
"""

from __future__ import annotations

import os

__all__ = ["settings"]

_settings: dict[str, int] | None = None


def _env_int(name: str, default: int, low: int, high: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw, 0)
    except ValueError:
        return default
    return min(max(value, low), high)


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity set, bounded by a cgroup CPU quota where one is set."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 2
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return cpus


def settings() -> dict[str, int]:
    """{"threads", "chunk", "slots", "split", "nt", "pipeline_min", "bounce_max", "fence_spin_us"}."""
    global _settings
    if _settings is None:
        threads = _env_int("IRONACCEL_CUDA_COPY_THREADS", max(1, min(8, usable_cpus() - 2)), 1, 64)
        chunk = _env_int("IRONACCEL_CUDA_COPY_CHUNK", 1 << 19, 1 << 16, 1 << 26) & ~0xFFF
        slots = _env_int("IRONACCEL_CUDA_COPY_SLOTS", max(8, 4 * threads), 2, 256)
        _settings = {
            "threads": threads,
            "chunk": chunk,
            "slots": slots,
            "split": _env_int("IRONACCEL_CUDA_COPY_SPLIT", 32, 1, 4096),
            "nt": _env_int("IRONACCEL_CUDA_COPY_NT", 1, 0, 3),
            "pipeline_min": _env_int("IRONACCEL_CUDA_PIPELINE_MIN", 256 << 10, 1, 1 << 40),
            "bounce_max": _env_int("IRONACCEL_CUDA_BOUNCE_MAX", 64 << 10, 0, 1 << 24),
            "fence_spin_us": _env_int("IRONACCEL_CUDA_FENCE_SPIN_US", 200, 0, 100_000),
        }
    return _settings
