"""What does one batched copy save over a loop of copies?  (`cu.copy_batch`, cuMemcpyBatchAsync)

    python3 ironaccel-cuda/bench/experiments/probe_copy_batch.py [--rounds 15] [--copies 64] [--block 4096]

The shape of a KV-cache block swap: `--copies` blocks of `--block` bytes, device to device and device to
page-locked host, each way timed per batch + stream synchronize, interleaved round by round, medians of the
rounds with the spread of the middle half.  Ways: ironaccel's `copy_batch` with buffers and with uint64
address arrays (also with src_access="any" and prefer_overlap: do the hints change the driver's per-copy cost?);
a loop of `DeviceBuf.copy_from(src, stream=s)`; raw `cuda.bindings` cuMemcpyBatchAsync with the
arrays built per call; cuda.core's `utils.copy_batch` when the installed cuda.core has it, and the cuda.core
compat's.  A probe (for the note and the README), not a target row.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np


def interleaved(ways: dict[str, Callable[[], None]], rounds: int, reps: int) -> dict[str, tuple[float, float, float]]:
    """{name: (median, q1, q3) ns per call} over `rounds` rounds of `reps` calls, the ways alternating."""
    times: dict[str, list[float]] = {k: [] for k in ways}
    for f in ways.values():
        f()  # warm
    for r in range(rounds):
        order = list(ways) if r % 2 == 0 else list(reversed(ways))
        for name in order:
            f = ways[name]
            t0 = time.perf_counter_ns()
            for _ in range(reps):
                f()
            times[name].append((time.perf_counter_ns() - t0) / reps)
    out = {}
    for name, ts in times.items():
        q = statistics.quantiles(ts, n=4)
        out[name] = (statistics.median(ts), q[0], q[2])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--copies", type=int, default=64)
    parser.add_argument("--block", type=int, default=4096)
    a = parser.parse_args()

    import ironaccel_cuda as cu

    dev = cu.Device(0)
    s = dev.create_stream()
    n, block = a.copies, a.block
    src = dev.alloc(n * block, "uint8")
    src.copy_from(np.random.default_rng(0).integers(0, 256, n * block, dtype=np.uint8))
    dst = dev.alloc(n * block, "uint8")
    host = dev.alloc_pinned(n * block, "uint8")
    srcs = [src[i * block:(i + 1) * block] for i in range(n)]
    dsts = [dst[i * block:(i + 1) * block] for i in range(n)]
    order = np.random.default_rng(1).permutation(n).astype(np.uint64)  # scattered blocks, as a swap is
    d_addrs = dst.ptr + order * block
    h_addrs = host.ptr + order * block
    s_addrs = src.ptr + np.arange(n, dtype=np.uint64) * block
    dev.synchronize()

    def batch_buffers() -> None:
        cu.copy_batch(dsts, srcs, stream=s)
        s.synchronize()

    def batch_arrays() -> None:
        cu.copy_batch(d_addrs, s_addrs, block, stream=s)
        s.synchronize()

    any_order = cu.CopyAttributes(src_access="any")
    overlap = cu.CopyAttributes(prefer_overlap=True)

    def batch_any() -> None:
        cu.copy_batch(d_addrs, s_addrs, block, stream=s, attributes=any_order)
        s.synchronize()

    def batch_overlap() -> None:
        cu.copy_batch(d_addrs, s_addrs, block, stream=s, attributes=overlap)
        s.synchronize()

    def batch_to_host() -> None:
        cu.copy_batch(h_addrs, s_addrs, block, stream=s)
        s.synchronize()

    def loop_copy_from() -> None:
        for d, x in zip(dsts, srcs):
            d.copy_from(x, stream=s)
        s.synchronize()

    from cuda.bindings import driver as drv

    sh = drv.CUstream(s.handle)
    attr = drv.CUmemcpyAttributes()
    attr.srcAccessOrder = drv.CUmemcpySrcAccessOrder.CU_MEMCPY_SRC_ACCESS_ORDER_STREAM
    d_list, s_list = [drv.CUdeviceptr(int(x)) for x in d_addrs], [drv.CUdeviceptr(int(x)) for x in s_addrs]

    def raw_bindings() -> None:
        err, = drv.cuMemcpyBatchAsync(d_list, s_list, [block] * n, n, [attr], [0], 1, sh)
        assert err == drv.CUresult.CUDA_SUCCESS, err
        assert drv.cuStreamSynchronize(sh)[0] == drv.CUresult.CUDA_SUCCESS

    ways: dict[str, Callable[[], None]] = {
        "ironaccel cu.copy_batch(dsts, srcs, stream=s), buffers": batch_buffers,
        "ironaccel cu.copy_batch(dst_addrs, src_addrs, block, stream=s), uint64 arrays": batch_arrays,
        "ironaccel cu.copy_batch, arrays, src_access='any'": batch_any,
        "ironaccel cu.copy_batch, arrays, prefer_overlap=True": batch_overlap,
        "ironaccel cu.copy_batch, device -> page-locked host, arrays": batch_to_host,
        "ironaccel loop of DeviceBuf.copy_from(src, stream=s)": loop_copy_from,
        "raw cuda.bindings cuMemcpyBatchAsync (lists built once)": raw_bindings,
    }
    try:
        from cuda.core import Device as CoreDevice
        from cuda.core.utils import copy_batch as core_copy_batch
    except ImportError as exc:
        print(f"cuda.core has no utils.copy_batch here ({exc}): its row is left out")
    else:
        try:
            cd = CoreDevice(0)
            cd.set_current()
            cs = cd.create_stream()
            core_src = [cd.allocate(block, stream=cs) for _ in range(n)]
            core_dst = [cd.allocate(block, stream=cs) for _ in range(n)]
            cs.sync()
        except Exception as exc:  # the fake driver of the CPU machine has no pools for cuda.core
            print(f"cuda.core could not set up its buffers ({type(exc).__name__}: {exc}): its row is left out")
        else:
            def core_batch() -> None:
                core_copy_batch(cs, core_src, core_dst)
                cs.sync()

            ways["cuda.core utils.copy_batch(stream, srcs, dsts)"] = core_batch
    from ironaccel_cuda_compat import cuda_core as cc

    xd = cc.Device(0)
    xd.set_current()
    xs = xd.create_stream()
    cc_src = [xd.allocate(block, stream=xs) for _ in range(n)]
    cc_dst = [xd.allocate(block, stream=xs) for _ in range(n)]
    xs.sync()

    def compat_batch() -> None:
        cc.utils.copy_batch(xs, cc_src, cc_dst)
        xs.sync()

    ways["compat utils.copy_batch(stream, srcs, dsts)"] = compat_batch

    batch_arrays()
    got = dst.copy_to_host().reshape(n, block)
    want = src.copy_to_host().reshape(n, block)
    assert (got[order.astype(np.intp)] == want).all(), "the batch copied the wrong bytes"

    res = interleaved(ways, a.rounds, a.reps)
    print(f"{n} copies of {block} bytes per batch, + stream synchronize; median per batch [q1, q3] over "
          f"{a.rounds} rounds of {a.reps}\n")
    print("| way | per batch | per copy |\n|---|---:|---:|")
    for name, (med, q1, q3) in res.items():
        print(f"| {name} | {med / 1000:,.1f} us [{q1 / 1000:,.1f}, {q3 / 1000:,.1f}] | {med / n:,.0f} ns |")


if __name__ == "__main__":
    main()
