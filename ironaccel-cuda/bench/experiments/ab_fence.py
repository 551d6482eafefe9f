"""A/B of fenced waits (native/fence.h): a busy stream's synchronize on the fence word, or cuStreamSynchronize.

    python3 ironaccel-cuda/bench/experiments/ab_fence.py [--rounds 3] [--json OUT]

"off" is IRONACCEL_CUDA_FENCE_SPIN_US=0 (every wait is cuStreamSynchronize, the bounce copies' too).  Each run
is a fresh process; runs alternate on / off.  Per run, through ironaccel's own API on a non-blocking stream:
an idle synchronize, then work + synchronize for a 4-byte fill, a launch of a small kernel, page-locked copies
of 64 KiB and 1 MiB each way, a 64 KiB device copy, a 1 KiB synchronous copy_to_host (the bounce), and a graph
of 100 launches.  Medians of 7 batches per run, then the median over runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from probe_idle_sync import per_call

SOURCE = r'extern "C" __global__ void touch(int* p) { if (p) p[threadIdx.x] = 1; }'
ROWS = ("idle sync", "fill 4 B + sync", "launch + sync", "h2d 64 KiB + sync", "d2h 64 KiB + sync",
        "h2d 1 MiB + sync", "d2h 1 MiB + sync", "d2d 64 KiB + sync", "copy_to_host 1 KiB (bounce)",
        "graph of 100 + sync")


def child() -> None:
    import numpy as np

    import ironaccel_cuda as ia
    from ironaccel_cuda import _core

    dev = ia.Device(0)
    s = dev.create_stream()
    fn = dev.load_module(ia.Program(SOURCE).compile()).function("touch")
    small = dev.alloc(1, "uint32", stream=s)
    pinned = dev.alloc_pinned(1 << 20, "uint8")
    a, b = dev.alloc(1 << 20, "uint8", stream=s), dev.alloc(1 << 20, "uint8", stream=s)
    a64, b64 = a[: 64 << 10], b[: 64 << 10]
    p64 = pinned.array[: 64 << 10]
    k1 = dev.alloc(1024, "uint8", stream=s)
    out1 = np.empty(1024, np.uint8)
    s.begin_capture()
    for _ in range(100):
        fn.launch(1, 32, np.uint64(0), stream=s)
    graph = s.end_capture().instantiate()
    s.synchronize()

    def loop(body):
        def run(k: int) -> None:
            for _ in range(k):
                body()
        return run

    def synced(op):
        def body() -> None:
            op()
            s.synchronize()
        return loop(body)

    cases = {
        "idle sync": (loop(s.synchronize), 5000),
        "fill 4 B + sync": (synced(lambda: small.memset(7, stream=s)), 1000),
        "launch + sync": (synced(lambda: fn.launch(1, 32, np.uint64(0), stream=s)), 1000),
        "h2d 64 KiB + sync": (synced(lambda: a64.copy_from(p64, stream=s)), 500),
        "d2h 64 KiB + sync": (synced(lambda: a64.copy_to_host(p64, stream=s)), 500),
        "h2d 1 MiB + sync": (synced(lambda: a.copy_from(pinned.array, stream=s)), 200),
        "d2h 1 MiB + sync": (synced(lambda: a.copy_to_host(pinned.array, stream=s)), 200),
        "d2d 64 KiB + sync": (synced(lambda: b64.copy_from(a64, stream=s)), 500),
        "copy_to_host 1 KiB (bounce)": (loop(lambda: k1.copy_to_host(out1, stream=None)), 500),
        "graph of 100 + sync": (synced(lambda: graph.launch(s)), 100),
    }
    out = {name: per_call(fn_k, k) for name, (fn_k, k) in cases.items()}
    out["fence"] = _core.fence_info()
    print(json.dumps(out))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, object]]] = {"on": [], "off": []}
    for r in range(args.rounds):
        for side in ("on", "off") if r % 2 == 0 else ("off", "on"):
            env = dict(os.environ)
            env.pop("IRONACCEL_CUDA_FENCE_SPIN_US", None)
            if side == "off":
                env["IRONACCEL_CUDA_FENCE_SPIN_US"] = "0"
            p = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True, timeout=120,
                               env=env)
            try:
                runs[side].append(json.loads(p.stdout.strip().splitlines()[-1]))
            except (IndexError, ValueError):
                print(f"{side}: failed: {p.stderr.strip()[-400:]}", flush=True)
    print("| row | fence on | off (cuStreamSynchronize) | off / on |\n|---|---:|---:|---:|")
    for row in ROWS:
        on = statistics.median(float(r[row]) for r in runs["on"])  # type: ignore[arg-type]
        off = statistics.median(float(r[row]) for r in runs["off"])  # type: ignore[arg-type]
        print(f"| {row} | {on:,.0f} ns | {off:,.0f} ns | {off / on:.2f} |")
    for side in ("on", "off"):
        print(f"fence_info, last {side} run: {runs[side][-1]['fence'] if runs[side] else '-'}")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
