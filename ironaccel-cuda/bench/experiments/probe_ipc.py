"""Why does an IPC import + close cost more through ironaccel than through raw cuda.bindings?

    python3 ironaccel-cuda/bench/experiments/probe_ipc.py [--rounds 5] [-n 200]

The main benchmark's IPC row (export + import + close of a 1 MiB pool buffer, the importer another process)
measured ironaccel at 170-208 us against raw cuda.bindings' 113 us (H200).  Python adds ~15 us
there (the whole open + close is 18.6 us against the fake driver), so the rest is the driver's.  One visible
difference: ironaccel frees an imported pointer on the device's default stream, which is a blocking stream
(CU_STREAM_DEFAULT), where the raw side uses a non-blocking one.  The importer here times, interleaved per round,
cuMemPoolImportPointer + cuMemFreeAsync + cuStreamSynchronize on a non-blocking stream, a blocking stream and
the legacy stream, and ironaccel's `desc.open(dev).close()` (with its pool and `without_pool()`); medians of the
rounds, per import + close.  The exporter's side is timed too (the row stayed at 169 us against raw's
89 us with `without_pool()`, while the importer alone is 91 us against 78): ironaccel's `ipc.export(buf)` and
`.without_pool()` against cuMemPoolExportPointer + the 64 bytes read out.  And the pool's cap: the same row ran
cuda.core (whose side makes its pool with max_size=64 MiB) at 108 us against raw's 163 us (pools without a cap),
so the importer also times pools created with `--max-size` (default 64 MiB) beside uncapped ones.
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing
import statistics
import time


def importer(conn, rounds: int, n: int) -> None:
    import cuda.bindings.driver as cu

    import ironaccel_cuda as ia

    (pool_desc, desc), (capped_pool_desc, capped_desc) = conn.recv()
    dev = ia.Device(0)
    held = [pool_desc.open(dev), capped_pool_desc.open(dev)]  # noqa: F841  (every import below reuses them)
    streams = {"non-blocking stream": cu.cuStreamCreate(1)[1], "blocking stream": cu.cuStreamCreate(0)[1],
               "legacy stream": cu.CUstream(0),
               "the Device's default stream (where ironaccel frees)": cu.CUstream(int(dev.default_stream._h))}

    from ironaccel_cuda import _core

    def raw(stream, pd=pool_desc, d=desc, compiled_free=False):
        """The driver's import, then cuMemFreeAsync + cuStreamSynchronize on `stream`, through cuda.bindings or
        (`compiled_free`) ironaccel's compiled `_core.mem_free_async` + `_core.stream_sync`."""
        opened = pd.open(dev)  # one more count of the pool `held` has open: its handle for the raw calls
        handle = opened._h
        data = cu.CUmemPoolPtrExportData()
        ctypes.memmove(data.getPtr(), d.handle, 64)
        h = int(stream)

        def run(opened=opened) -> None:
            for _ in range(n):
                err, ptr = cu.cuMemPoolImportPointer(handle, data)
                assert not err, err
                if compiled_free:
                    _core.mem_free_async(int(ptr), h)
                    _core.stream_sync(h)
                else:
                    assert not cu.cuMemFreeAsync(ptr, stream)[0]
                    assert not cu.cuStreamSynchronize(stream)[0]
        return run

    def through_ironaccel(d):
        def run() -> None:
            for _ in range(n):
                d.open(dev).close()
        return run

    ways = {**{f"raw, {name}": raw(s) for name, s in streams.items()},
            "ironaccel desc.open(dev).close()": through_ironaccel(desc),
            "ironaccel desc.without_pool().open(dev).close()": through_ironaccel(desc.without_pool()),
            "raw import, then _core.mem_free_async + _core.stream_sync (default stream)":
                raw(streams["the Device's default stream (where ironaccel frees)"], compiled_free=True),
            "raw, non-blocking stream, capped pool": raw(streams["non-blocking stream"], capped_pool_desc, capped_desc),
            "ironaccel desc.without_pool().open(dev).close(), capped pool":
                through_ironaccel(capped_desc.without_pool())}
    conn.send(interleaved(ways, rounds, n))


def interleaved(ways: dict, rounds: int, n: int) -> dict[str, float]:
    """Median over `rounds` of each way's time per call (`n` calls a run), the order rotated each round."""
    times: dict[str, list[float]] = {k: [] for k in ways}
    for r in range(rounds):
        names = list(ways)
        names = names[r % len(names):] + names[: r % len(names)]
        for name in names:
            t0 = time.perf_counter_ns()
            ways[name]()
            times[name].append((time.perf_counter_ns() - t0) / n)
    return {k: statistics.median(v) for k, v in times.items()}


def exporter_ways(ia, buf, n: int) -> dict:
    """The exporting side's ways, per export of one pool buffer."""
    import cuda.bindings.driver as cu

    export = ia.ipc.export
    base = int(buf.ptr)

    def raw() -> None:
        for _ in range(n):
            err, data = cu.cuMemPoolExportPointer(base)
            assert not err, err
            ctypes.string_at(data.getPtr(), 64)

    def full() -> None:
        for _ in range(n):
            export(buf)

    def without() -> None:
        for _ in range(n):
            export(buf).without_pool()

    return {"raw cuMemPoolExportPointer + string_at": raw, "ironaccel ipc.export(buf)": full,
            "ironaccel ipc.export(buf).without_pool()": without}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("--max-size", type=int, default=64 << 20, help="the capped pool's max_size (bytes)")
    args = parser.parse_args()
    import ironaccel_cuda as ia

    dev = ia.Device(0)
    pool = dev.create_driver_pool(ipc=True)
    s = dev.create_stream()
    buf = pool.allocate(1 << 20, "uint8", stream=s)
    capped = dev.create_driver_pool(ipc=True, max_size=args.max_size)
    capped_buf = capped.allocate(1 << 20, "uint8", stream=s)
    s.synchronize()
    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe()
    p = ctx.Process(target=importer, args=(there, args.rounds, args.n))
    p.start()
    here.send(((ia.ipc.export(pool), ia.ipc.export(buf)), (ia.ipc.export(capped), ia.ipc.export(capped_buf))))
    got = here.recv() if here.poll(240) else {"error": "no answer"}
    p.join(30)
    print("| importer's way, per import + close of a 1 MiB pool buffer | median |\n|---|---:|")
    for name, ns in got.items():
        print(f"| {name} | {ns / 1000:,.1f} us |" if isinstance(ns, float) else f"| {name} | {ns} |")
    print("\n| exporter's way, per export of the buffer | median |\n|---|---:|")
    for name, ns in interleaved(exporter_ways(ia, buf, args.n), args.rounds, args.n).items():
        print(f"| {name} | {ns / 1000:,.2f} us |")
    for b in (buf, capped_buf):
        b.close()
    pool.close()
    capped.close()


if __name__ == "__main__":
    main()
