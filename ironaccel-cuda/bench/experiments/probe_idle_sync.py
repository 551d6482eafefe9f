"""What makes an idle stream's synchronize slow in a process: its cost after each kind of driver operation.

    python3 ironaccel-cuda/bench/experiments/probe_idle_sync.py [--reverse | --remedies | --first-load
                                                     | --after-launches [--rounds N] | --per-cpu] [--json OUT]

The benchmarks measure 1.35-1.7 µs for `cuStreamSynchronize` of an idle non-blocking stream, in Python and in
the C floor's process alike, once other operations have run there; a fresh process measures 0.2-0.4 µs
(bench/experiments/README.md).  This probe opens device 0 and a non-blocking stream,
times 7 batches of 5,000 idle syncs (the compiled core's call), then runs one operation after another and
times them again after each: the first operation after which the figure jumps is the one that puts the process
in the slow state.  `--reverse` runs the operations in the opposite order (the module load stays before the
launches), to tell an operation from the time that has passed.  `--remedies` puts the process in that state
with each of three operations and tries one way out per row (see `remedies`).  Findings (H200): README.md
beside this file; on launches, CPU placement, and cuCtxSynchronize as the only way out found.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SOURCE = r'extern "C" __global__ void touch(int* p) { if (p) p[threadIdx.x] = 1; }'


def per_call(fn_k: Callable[[int], None], k: int = 2000) -> float:
    """Median over 7 batches of the time per call of `fn_k(k)`, which makes k calls."""
    per = []
    for _ in range(7):
        t0 = time.perf_counter_ns()
        fn_k(k)
        per.append((time.perf_counter_ns() - t0) / k)
    return statistics.median(per)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reverse", action="store_true")
    parser.add_argument("--remedies", action="store_true",
                        help="what clears the slow state, and what else it slows (see remedies())")
    parser.add_argument("--first-load", action="store_true",
                        help="which call ends the slow state a process's first module load leaves (a fresh "
                             "process per way out)")
    parser.add_argument("--first-load-child", help=argparse.SUPPRESS)
    parser.add_argument("--after-launches", action="store_true",
                        help="which call ends the slow state a batch of launches and its wait leave (a fresh "
                             "process per way out)")
    parser.add_argument("--after-launches-child", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=1, help="--after-launches: processes per way out")
    parser.add_argument("--per-cpu", action="store_true",
                        help="the --after-launches child with nothing as way out, pinned to each CPU in turn")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.first_load:
        first_load()
        return
    if args.per_cpu:
        per_cpu(args.json)
        return

    import cuda.bindings.driver as cu

    import ironaccel_cuda as ia
    from ironaccel_cuda import _core

    dev = ia.Device(0)
    dev._bind_here()
    stream = dev.create_stream()
    h = stream._h
    held: dict[str, Any] = {}

    def ok(result: Any) -> Any:
        err = result[0] if isinstance(result, tuple) else result
        if int(err) != 0:
            raise RuntimeError(f"driver error {err}")
        return result[1] if isinstance(result, tuple) and len(result) > 1 else None

    def measure() -> float:
        per = []
        for _ in range(7):
            t0 = time.perf_counter_ns()
            for _ in range(5000):
                _core.stream_sync(h)
            per.append((time.perf_counter_ns() - t0) / 5000)
        return statistics.median(per)

    s = cu.CUstream(h)

    def alloc() -> None:
        ok(cu.cuMemFree(ok(cu.cuMemAlloc(1 << 20))))

    def pool() -> None:
        ok(cu.cuMemFreeAsync(ok(cu.cuMemAllocAsync(1 << 20, s)), s))
        _core.stream_sync(h)

    def pinned() -> None:
        held["pinned"] = ok(cu.cuMemHostAlloc(1 << 20, 0))
        held["dev"] = ok(cu.cuMemAlloc(1 << 20))

    def pinned_copy() -> None:
        ok(cu.cuMemcpyHtoDAsync(held["dev"], held["pinned"], 65536, s))
        _core.stream_sync(h)

    host = np.ones(65536, np.uint8)  # pageable, alive for the whole run

    def pageable_htod() -> None:
        ok(cu.cuMemcpyHtoD(held["dev"], host.ctypes.data, host.nbytes))

    def pageable_dtoh() -> None:
        ok(cu.cuMemcpyDtoH(host.ctypes.data, held["dev"], host.nbytes))

    def timing_event() -> None:
        e = ok(cu.cuEventCreate(0))
        ok(cu.cuEventRecord(e, s))
        ok(cu.cuEventSynchronize(e))
        ok(cu.cuEventDestroy(e))

    def blocking_stream() -> None:
        held["blocking"] = ok(cu.cuStreamCreate(0))

    def ctx_sync() -> None:
        ok(cu.cuCtxSynchronize())

    def module() -> None:
        held["fn"] = dev.load_module(ia.Program(SOURCE).compile()).function("touch")

    def launch_stream() -> None:
        held["fn"].launch(1, 32, np.uint64(0), stream=stream)
        _core.stream_sync(h)

    def launch_default() -> None:
        held["fn"].launch(1, 32, np.uint64(0))
        ok(cu.cuCtxSynchronize())

    steps: list[tuple[str, Callable[[], None]]] = [
        ("cuMemAlloc + cuMemFree 1 MiB", alloc), ("pool alloc + free on the stream", pool),
        ("cuMemHostAlloc + cuMemAlloc", pinned), ("pinned -> device copy on the stream", pinned_copy),
        ("pageable cuMemcpyHtoD", pageable_htod), ("pageable cuMemcpyDtoH", pageable_dtoh),
        ("event with timing, record + sync", timing_event), ("a blocking stream created", blocking_stream),
        ("cuCtxSynchronize", ctx_sync), ("compile + load a module", module),
        ("launch on the stream", launch_stream), ("launch on the default stream", launch_default),
    ]
    if args.remedies:
        remedies(cu, ok, dev, stream, host, measure)
        return
    if args.after_launches:
        after_launches(cu, ok, dev, stream, measure, args.json, None, args.rounds)
        return
    if args.after_launches_child:
        after_launches(cu, ok, dev, stream, measure, None, args.after_launches_child, 1)
        return
    if args.first_load_child:
        before = measure()
        module = dev.load_module(ia.Program(SOURCE).compile())  # this process's first load
        time.sleep(0.005)
        loaded = measure()
        fn = module.function("touch")  # cuModuleGetFunction: with lazy loading, the code goes to the device now
        time.sleep(0.005)
        got = measure()
        way = args.first_load_child
        if way == "cuStreamQuery(0)":
            _core.stream_query(0)
        elif way == "cuStreamSynchronize(0)":
            ok(cu.cuStreamSynchronize(0))
        elif way == "cuCtxSynchronize":
            ok(cu.cuCtxSynchronize())
        elif way == "launch on stream 0 + cuStreamSynchronize(0)":
            fn.launch(1, 32, np.uint64(0), stream=dev.legacy_stream)
            ok(cu.cuStreamSynchronize(0))
        elif way == "event on the stream + cuEventSynchronize":
            e = ok(cu.cuEventCreate(2))
            ok(cu.cuEventRecord(e, s))
            ok(cu.cuEventSynchronize(e))
        elif way == "cuStreamSynchronize(stream)":
            ok(cu.cuStreamSynchronize(s))
        elif way == "cuFuncLoad":
            ok(cu.cuFuncLoad(cu.CUfunction(int(fn._h))))
        elif way == "event on a new non-blocking stream + cuEventSynchronize":
            s2 = ok(cu.cuStreamCreate(1))
            e = ok(cu.cuEventCreate(2))
            ok(cu.cuEventRecord(e, s2))
            ok(cu.cuEventSynchronize(e))
        elif way == "launch on the stream + cuStreamSynchronize(stream)":
            fn.launch(1, 32, np.uint64(0), stream=stream)
            ok(cu.cuStreamSynchronize(s))
        elif way == "launch on the stream + event on it + cuEventSynchronize":
            fn.launch(1, 32, np.uint64(0), stream=stream)
            e = ok(cu.cuEventCreate(2))
            ok(cu.cuEventRecord(e, s))
            ok(cu.cuEventSynchronize(e))
        elif way == "a second module load":
            held["m2"] = dev.load_module(ia.Program(SOURCE).compile())
        elif way != "nothing":
            raise SystemExit(f"no such way out: {way!r} (FIRST_LOAD_WAYS and this list must agree)")
        time.sleep(0.005)
        print(json.dumps({"before": before, "loaded": loaded, "function": got, "after": measure()}))
        return
    if args.reverse:
        steps = steps[:3] + steps[3:9][::-1] + steps[9:]
    rows: list[dict[str, object]] = [{"after": "nothing (fresh)", "ns": measure()}]
    for label, fn in steps:
        try:
            fn()
        except Exception as exc:  # report and go on: the other steps still say something
            rows.append({"after": label, "error": f"{type(exc).__name__}: {exc}"})
            continue
        rows.append({"after": label, "ns": measure()})
    time.sleep(2)
    rows.append({"after": "2 s idle", "ns": measure()})
    for row in rows:
        print(f"{row['after']:40s} " + (f"{row['ns']:7.0f} ns" if "ns" in row else str(row["error"])), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"reverse": args.reverse, "rows": rows}, indent=1))
    sys.stdout.flush()


FIRST_LOAD_WAYS = ("nothing", "cuStreamQuery(0)", "cuStreamSynchronize(0)", "cuStreamSynchronize(stream)",
                   "event on the stream + cuEventSynchronize", "event on a new non-blocking stream + "
                   "cuEventSynchronize", "cuFuncLoad", "a second module load",
                   "launch on stream 0 + cuStreamSynchronize(0)", "launch on the stream + cuStreamSynchronize(stream)",
                   "launch on the stream + event on it + cuEventSynchronize", "cuCtxSynchronize")


def _child(flag: str, value: str, timeout: float, **run: Any) -> dict[str, Any]:
    """This script run again with `flag value` (a child mode that prints one JSON line last): that line, or
    {"error": the end of its stderr}.  `run` goes to subprocess.run (env, preexec_fn)."""
    import subprocess

    done = subprocess.run([sys.executable, __file__, flag, value], capture_output=True, text=True, timeout=timeout,
                          **run)
    try:
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (IndexError, ValueError):
        return {"error": done.stderr.strip()[-400:]}


AFTER_LAUNCH_WAYS = ("nothing", "2 ms of nothing", "cuStreamQuery(stream)", "cuStreamSynchronize(stream)",
                     "cuStreamQuery(0)", "cuStreamSynchronize(0)", "event on the stream + cuEventSynchronize",
                     "event on the stream + cuEventQuery until done",
                     "event on a new non-blocking stream + cuEventSynchronize", "cuCtxSynchronize")


def after_launches(cu: Any, ok: Callable[[Any], Any], dev: Any, stream: Any, measure: Callable[[], float],
                   out: Path | None, way: str | None, rounds: int) -> None:
    """Which call ends the slow state that a batch of 1000 launches and its wait leave (the PyCUDA benchmark's
    launch rows put both sides there).  Each way out gets a fresh process, the child `way`: in one
    process the state stopped appearing after five entries.  Whether a process enters it depends on the vCPU it
    runs on (`per_cpu`), so a way out says something only over `rounds` processes; a `cycles` child traces
    eight entries in one process.  H200 findings: bench/experiments/README.md"""
    if way is None:
        rows: list[Any] = []
        for label in [*AFTER_LAUNCH_WAYS, "cycles"] * rounds:
            rows.append({"way": label, **_child("--after-launches-child", label, 120)})
            print(json.dumps(rows[-1]), flush=True)
        if out is not None:
            out.write_text(json.dumps(rows, indent=1))
        return

    import ironaccel_cuda as ia
    from ironaccel_cuda import _core

    fn = dev.load_module(ia.Program(SOURCE).compile()).function("touch")
    h = stream._h
    s = cu.CUstream(h)
    arg = np.uint64(0)

    def enter() -> None:
        for _ in range(1000):
            fn.launch(1, 32, arg, stream=stream)
        _core.stream_sync(h)  # busy: the fence word

    def event_here(query: bool) -> None:
        e = ok(cu.cuEventCreate(2))
        ok(cu.cuEventRecord(e, s))
        if query:
            while int(cu.cuEventQuery(e)[0]) != 0:
                pass
        else:
            ok(cu.cuEventSynchronize(e))
        ok(cu.cuEventDestroy(e))

    def new_stream_event() -> None:
        s2 = ok(cu.cuStreamCreate(1))
        e = ok(cu.cuEventCreate(2))
        ok(cu.cuEventRecord(e, s2))
        ok(cu.cuEventSynchronize(e))
        ok(cu.cuEventDestroy(e))
        ok(cu.cuStreamDestroy(s2))

    ways: dict[str, Callable[[], None]] = dict(zip(AFTER_LAUNCH_WAYS, (
        lambda: None,
        lambda: time.sleep(0.002),
        lambda: cu.cuStreamQuery(s),
        lambda: ok(cu.cuStreamSynchronize(s)),
        lambda: cu.cuStreamQuery(cu.CUstream(0)),
        lambda: ok(cu.cuStreamSynchronize(cu.CUstream(0))),
        lambda: event_here(False),
        lambda: event_here(True),
        new_stream_event,
        lambda: ok(cu.cuCtxSynchronize()),
    ), strict=True))
    ok(cu.cuCtxSynchronize())
    fresh = measure()
    if way == "cycles":
        trace = []
        for _ in range(8):
            ok(cu.cuCtxSynchronize())
            enter()
            trace.append([round(measure()), round(measure())])
        print(json.dumps({"way": way, "fresh": round(fresh), "entered, measured twice": trace}))
        return
    enter()
    entered = [round(measure()), round(measure())]
    ways[way]()
    after = [round(measure()), round(measure())]
    ok(cu.cuCtxSynchronize())
    enter()
    print(json.dumps({"way": way, "fresh": round(fresh), "entered": entered, "after": after,
                      "entered again": round(measure())}))


def per_cpu(out: Path | None) -> None:
    """The `nothing` child of --after-launches pinned to each CPU in turn (it inherits the affinity), beside the
    GPU's NUMA-local CPUs: --rounds 3 found processes whose first idle synchronize took 170-200 ns never entering
    the slow state and those at 340-420 ns mostly entering it, as CPU placement would make them.  On the H200
    guest 4 of 16 vCPUs entered it, in one NUMA node."""
    import os
    import subprocess

    local = "?"
    try:
        bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout.split()[0].lower()[4:]
        local = Path(f"/sys/bus/pci/devices/{bus}/local_cpulist").read_text().strip()
    except (OSError, IndexError, subprocess.SubprocessError):
        pass
    print(f"GPU-local CPUs: {local}", flush=True)
    rows = []
    for cpu in sorted(os.sched_getaffinity(0)):
        rows.append({"cpu": cpu, **_child("--after-launches-child", "nothing", 120,
                                          preexec_fn=lambda c=cpu: os.sched_setaffinity(0, {c}))})
        print(json.dumps(rows[-1]), flush=True)
    if out is not None:
        out.write_text(json.dumps({"gpu_local_cpus": local, "rows": rows}, indent=1))


def first_load() -> None:
    """An earlier A/B found that a process's first module load leaves the slow state, and that a query of the
    legacy stream does not end it (in the probe's own run, a launch and cuCtxSynchronize did).  One fresh process
    per way out: idle query before the load, after it, and after the way out."""
    print("| way out tried after the first load | before the load | after it | after cuModuleGetFunction | "
          "after the way out |\n|---|---:|---:|---:|---:|")
    import os

    runs = [(way, way, {}) for way in FIRST_LOAD_WAYS]
    runs.append(("nothing, with CUDA_MODULE_LOADING=EAGER", "nothing", {"CUDA_MODULE_LOADING": "EAGER"}))
    for label, way, env in runs:
        r = _child("--first-load-child", way, 60, env={**os.environ, **env})
        if "error" in r:
            print(f"| {label} | failed: {r['error'][-300:]} | | |", flush=True)
        else:
            print(f"| {label} | {r['before']:,.0f} ns | {r['loaded']:,.0f} ns | {r['function']:,.0f} ns | "
                  f"{r['after']:,.0f} ns |", flush=True)


def remedies(cu: Any, ok: Callable[[Any], Any], dev: Any, stream: Any, host: Any,
             measure: Callable[[], float]) -> None:
    """An earlier probe run found the slow state follows work left on the legacy stream that nobody has
    waited for (a pageable cuMemcpyHtoD, a module load), and ends with a wait on the legacy stream
    (cuMemcpyDtoH, cuCtxSynchronize).  This mode puts the process in that state with each of three operations,
    then tries one way out per row, and also times other hot calls in the slow and the cleared state."""
    import ironaccel_cuda as ia
    from ironaccel_cuda import _core

    h = stream._h
    ok(cu.cuCtxSynchronize())
    pinned = ok(cu.cuMemHostAlloc(1 << 16, 0))
    dst = ok(cu.cuMemAlloc(1 << 20))
    image = ia.Program(SOURCE).compile()
    modules: list[Any] = []
    fn = dev.load_module(image).function("touch")
    ev = _core.event_create(2)  # CU_EVENT_DISABLE_TIMING
    blocking = ok(cu.cuStreamCreate(0))
    hb = int(blocking)

    dirty = {
        "pageable cuMemcpyHtoD 1 KiB": lambda: ok(cu.cuMemcpyHtoD(dst, host.ctypes.data, 1024)),
        "pinned cuMemcpyHtoDAsync on stream 0": lambda: ok(cu.cuMemcpyHtoDAsync(dst, pinned, 1024, 0)),
        "module load": lambda: modules.append(dev.load_module(image)),
    }
    ways_out = {
        "nothing, 20 ms": lambda: time.sleep(0.02),
        "cuStreamQuery(0)": lambda: _core.stream_query(0),
        "cuStreamSynchronize(0)": lambda: ok(cu.cuStreamSynchronize(0)),
        "event on stream 0, cuEventSynchronize": lambda: (_core.event_record(ev, 0), ok(cu.cuEventSynchronize(
            cu.CUevent(ev)))),
        "event on stream 0, cuEventQuery": lambda: (_core.event_record(ev, 0), time.sleep(0.001),
                                                    _core.event_query(ev)),
        "cuStreamSynchronize(blocking stream)": lambda: ok(cu.cuStreamSynchronize(blocking)),
        "cuCtxSynchronize": lambda: ok(cu.cuCtxSynchronize()),
    }
    rows: list[tuple[str, str, float, float]] = []
    for dname, make in dirty.items():
        for wname, way in ways_out.items():
            make()
            time.sleep(0.005)  # the work itself is long done
            before = measure()
            way()
            rows.append((dname, wname, before, measure()))
            ok(cu.cuCtxSynchronize())
    print("| made slow by | way out tried | idle query before | after |\n|---|---|---:|---:|")
    for d, w, b, a in rows:
        print(f"| {d} | {w} | {b:,.0f} ns | {a:,.0f} ns |")

    def q_nb(k: int) -> None:
        for _ in range(k):
            _core.stream_query(h)

    def q_blocking(k: int) -> None:
        for _ in range(k):
            _core.stream_query(hb)

    def q_legacy(k: int) -> None:
        for _ in range(k):
            _core.stream_query(0)

    def rec_sync(k: int) -> None:
        for _ in range(k):
            _core.event_record(ev, h)
            _core.event_sync(ev)

    def alloc_free(k: int) -> None:
        for _ in range(k):
            _core.mem_free_async(_core.mem_alloc_async(256, h), h)
        _core.stream_sync(h)

    def launches(k: int) -> None:
        for _ in range(k):
            fn.launch(1, 32, np.uint64(0), stream=stream)
        _core.stream_sync(h)

    calls = {"cuStreamQuery, idle non-blocking stream": q_nb, "cuStreamQuery, idle blocking stream": q_blocking,
             "cuStreamQuery(0), idle": q_legacy, "event record + sync, non-blocking stream": rec_sync,
             "cuMemAllocAsync + cuMemFreeAsync 256 B": alloc_free, "launch (ironaccel), non-blocking stream":
             launches}
    print("\n| call | cleared state | slow state (after a pageable cuMemcpyHtoD) |\n|---|---:|---:|")
    for name, call in calls.items():
        ok(cu.cuCtxSynchronize())
        call(50)
        clear = per_call(call)
        ok(cu.cuMemcpyHtoD(dst, host.ctypes.data, 1024))
        time.sleep(0.005)
        call(50)
        slow = per_call(call)
        print(f"| {name} | {clear:,.0f} ns | {slow:,.0f} ns |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
