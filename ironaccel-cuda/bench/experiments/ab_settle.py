"""A/B of `module.settle_lazy_load`: what getting a kernel costs the process's later queries and waits, with the
settle and without it (H200 runs: bench/experiments/README.md).

    python3 ironaccel-cuda/bench/experiments/ab_settle.py [--rounds 3] [--json OUT]

Each run is a fresh process (the state is the process's): it gets one kernel by one public way (ironaccel's
`Module.function`, the cuda.core surface's `ObjectCode.get_kernel`, the PyCUDA surface's `get_function`; a
Library's `function`, which does not settle (bench/experiments/probe_library_load.py says why), timed after its get and
after its first launch), then times on an idle non-blocking stream of the same context: its query, an event
record + sync, a 64 KiB page-locked -> device copy + sync, and a launch + sync.  "off" replaces the settle with
nothing.  Runs alternate on / off, rounds times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from probe_idle_sync import per_call  # this folder is on sys.path: the script is run by its path

SOURCE = (r'extern "C" __global__ void touch(int* p) { if (p) p[threadIdx.x] = 1; }'
          r'extern "C" __global__ void touch2(int* p) { if (p) p[threadIdx.x] = 2; }')
CASES = ("Module.function", "cuda.core surface get_kernel", "PyCUDA surface get_function", "Library.function")


def child(case: str, settle: bool) -> dict[str, float]:
    import cuda.bindings.driver as cu
    import numpy as np

    import ironaccel_cuda as ia
    from ironaccel_cuda import _core, module

    if not settle:
        from ironaccel_cuda_compat.cuda_core import _ia
        from ironaccel_cuda_compat.pycuda import _module as pycuda_module

        def nothing(ctx: Any) -> None:
            return None

        module.settle_lazy_load = _ia.settle_lazy_load = pycuda_module.settle_lazy_load = nothing  # type: ignore
    dev = ia.Device(0)
    dev._bind_here()
    stream = dev.create_stream()
    h = stream._h
    ev = _core.event_create(2)  # CU_EVENT_DISABLE_TIMING
    err, dst = cu.cuMemAlloc(1 << 16)
    err2, pinned = cu.cuMemHostAlloc(1 << 16, 0)
    assert not err and not err2

    def query(k: int) -> None:
        for _ in range(k):
            _core.stream_sync(h)

    def event(k: int) -> None:
        for _ in range(k):
            _core.event_record(ev, h)
            _core.event_sync(ev)

    def copy(k: int) -> None:
        for _ in range(k):
            _core.memcpy_htod(int(dst), int(pinned), 1 << 16, h)
            _core.stream_sync(h)

    out: dict[str, float] = {}
    t0 = time.perf_counter_ns()
    if case == "Module.function":
        code = ia.Program(SOURCE).compile()
        m = dev.load_module(code)
        t0 = time.perf_counter_ns()
        fn = m.function("touch")
        out["get_ns"] = time.perf_counter_ns() - t0
        t0 = time.perf_counter_ns()
        m.function("touch2")
        out["get2_ns"] = time.perf_counter_ns() - t0
    elif case == "cuda.core surface get_kernel":
        from ironaccel_cuda_compat import cuda_core as cc

        cdev = cc.Device(0)
        cdev.set_current()
        obj = cc.Program(SOURCE, code_type="c++").compile("cubin")
        obj.code  # noqa: B018 -- compiled now, outside the timed get
        t0 = time.perf_counter_ns()
        fn = obj.get_kernel("touch")._fn
        out["get_ns"] = time.perf_counter_ns() - t0
        t0 = time.perf_counter_ns()
        obj.get_kernel("touch2")
        out["get2_ns"] = time.perf_counter_ns() - t0
    elif case == "PyCUDA surface get_function":
        import ironaccel_cuda_compat.pycuda.autoprimaryctx
        from ironaccel_cuda_compat.pycuda.compiler import SourceModule

        sm = SourceModule(SOURCE, no_extern_c=True)
        t0 = time.perf_counter_ns()
        pf = sm.get_function("touch")
        fn = None
        out["get_ns"] = time.perf_counter_ns() - t0
        t0 = time.perf_counter_ns()
        sm.get_function("touch2")
        out["get2_ns"] = time.perf_counter_ns() - t0
    elif case == "Library.function":
        lib = ia.Library(ia.Program(SOURCE).compile())
        t0 = time.perf_counter_ns()
        fn = lib.function("touch", dev)
        out["get_ns"] = time.perf_counter_ns() - t0
        time.sleep(0.005)
        out["query_after_get_ns"] = per_call(query, 5000)
        fn.launch(1, 32, np.uint64(0), stream=stream)
        _core.stream_sync(h)
    else:
        raise SystemExit(f"no such case {case!r}")
    out.setdefault("get_ns", time.perf_counter_ns() - t0)
    out.setdefault("get2_ns", 0.0)
    time.sleep(0.005)
    out["query_ns"] = per_call(query, 5000)
    out["event_record_sync_ns"] = per_call(event, 2000)
    out["copy_64k_sync_ns"] = per_call(copy, 500)
    if fn is not None:
        def launch(k: int) -> None:
            for _ in range(k):
                fn.launch(1, 32, np.uint64(0), stream=stream)
                _core.stream_sync(h)
    else:
        def launch(k: int) -> None:
            for _ in range(k):
                pf(np.intp(0), block=(32, 1, 1), grid=(1, 1))
            _core.stream_sync(0)
    out["launch_sync_ns"] = per_call(launch, 500)
    out["graph_100_sync_ns"] = 0.0
    if fn is not None:  # an earlier compat run: graph replay 80 -> 115 us on every Python side after the settle
        stream.begin_capture()
        for _ in range(100):
            fn.launch(1, 32, np.uint64(0), stream=stream)
        exe = stream.end_capture().instantiate()

        def replay(k: int) -> None:
            for _ in range(k):
                exe.launch(stream)
                _core.stream_sync(h)
        replay(20)
        out["graph_100_sync_ns"] = per_call(replay, 100)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1] == "on")))
        return
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    for r in range(args.rounds):
        for case in CASES:
            for side in (("on", "off") if r % 2 == 0 else ("off", "on")):
                p = subprocess.run([sys.executable, __file__, "--child", case, side], capture_output=True, text=True,
                                   timeout=120)
                try:
                    runs.setdefault((case, side), []).append(json.loads(p.stdout.strip().splitlines()[-1]))
                except (IndexError, ValueError):
                    print(f"{case} {side}: failed: {p.stderr.strip()[-400:]}", flush=True)
    keys = ("get_ns", "get2_ns", "query_ns", "event_record_sync_ns", "copy_64k_sync_ns", "launch_sync_ns",
            "graph_100_sync_ns")
    print(f"| case | settle | {' | '.join(keys)} | runs |\n|---|---|" + "---:|" * (len(keys) + 1))
    for (case, side), rs in sorted(runs.items()):
        med = {k: statistics.median(r[k] for r in rs) for k in keys}
        print(f"| {case} | {side} | " + " | ".join(f"{med[k]:,.0f}" for k in keys) + f" | {len(rs)} |")
        if case == "Library.function":
            print(f"|  | (idle query after the get, before the first launch: "
                  f"{statistics.median(r['query_after_get_ns'] for r in rs):,.0f} ns) |" + " |" * len(keys))
    if args.json:
        args.json.write_text(json.dumps({f"{c} / {s}": rs for (c, s), rs in runs.items()}, indent=1))


if __name__ == "__main__":
    main()
