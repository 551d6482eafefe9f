"""Benchmark (not a test): one Slang kernel through ironaccel against slangpy on the same device.

    python ironaccel-slang/bench/bench_slang.py [--backend vulkan] [--pairs 41] [--compiles 7] [--json out.json]

Compile: `Slang(src).compile()` cold (a new source each time, nothing cached: in process through Slang's
library -- its COM API, a session per target kept for the process, a module per source -- or a slangc run where
that library is not found), from the disk cache (a new process's first pipeline: the compile saved), from memory,
and `device.pipeline()` of a source already translated; against slangpy's `load_module_from_source` +
`link_program` + `create_compute_kernel`, of a new module each time (a compile) and of the same module again (slang
answers a loaded module name from its session); and the row both sides are judged on, a new source to its first
result (ironaccel's `device.pipeline` or slangpy's load + link + create kernel, then one dispatch + wait), since
slangpy's kernel creation may leave building the target code to the first dispatch.  Dispatch: the saxpy kernel on 1024 float32, dispatch + wait,
params changed each time,
through ironaccel (`device.pipeline(Slang(...))`) against slangpy's `kernel.dispatch` on the same device
(bench/versus.py: sampled together, ratio with its bootstrap 95% interval).  Batch: 100 such dispatches, each
with its own `a`, as an ironaccel batch recorded once and re-submitted (`device.submit(batch).wait()`) against
slangpy's fastest idiom for the same work, its command encoder (100 `kernel.dispatch(..., command_encoder=enc)`,
`submit_command_buffer(enc.finish())`, `wait_for_idle()`; slang-rhi command buffers are one-shot, so slangpy
records each time).  Where slangpy is missing or cannot
open the device, the dispatch comparison is against ironaccel's own pipeline from the same SPIR-V (what the Slang
layer costs a dispatch), and the report says why.  slangpy is not in ironaccel's venvs: run this with a Python
that has it and the worktree's sources on PYTHONPATH (ironaccel-slang/bench/BASELINE.md names the command).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from harness import Case
from versus import compare, markdown, repeat, report, write_baseline

import ironaccel
from ironaccel_slang import Slang, compiler, inprocess

SOURCE = """
[shader("compute")]
[numthreads(64, 1, 1)]
void saxpy(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform StructuredBuffer<float> x,
           uniform float a, uniform uint n)
{
    if (tid.x < n)
        y[tid.x] = a * x[tid.x] + y[tid.x];
}
"""
N = 1024
DISPATCH_TARGET = 1.0  # ironaccel's dispatch + wait no slower than slangpy's
BATCH = 100  # dispatches per batch
#: The compile row both sides are judged on: slangpy's kernel creation may leave the target code to the first
#: dispatch, so only source-to-first-result times the same work on both.
FIRST_RESULT = "{}: a new source to its first result ({} + dispatch + wait)"


def median_ms(op: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        op()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e6


def open_slangpy(backend: str) -> tuple[Any, str]:
    """(slangpy device, "") on the same kind of device, or (None, why not)."""
    try:
        import slangpy as spy
    except ImportError as exc:
        return None, f"slangpy is not installed here ({exc})"
    kind = {"vulkan": spy.DeviceType.vulkan, "webgpu": spy.DeviceType.wgpu, "cuda": spy.DeviceType.cuda}.get(backend)
    if kind is None:
        return None, f"slangpy has no {backend} device"
    try:
        return spy.Device(type=kind, enable_hot_reload=False, enable_ray_tracing=False), ""
    except RuntimeError as exc:
        return None, f"slangpy {spy.__version__} cannot open a {backend} device here: " + " ".join(str(exc).split())


def slangpy_kernel(device: Any, name: str = "bench_saxpy", source: str = SOURCE) -> Any:
    """slangpy's kernel of `source`; its entry-point parameters are `dispatch` keywords (`vars=` binds globals only).
    A module name loaded before is answered from the session's module, so a cold load needs a new name."""
    module = device.load_module_from_source(name, source)
    return device.create_compute_kernel(device.link_program([module], [module.entry_point("saxpy")]))


def compile_rows(dev: Any, backend: str, spy_device: Any, runs: int) -> list[tuple[str, float]]:
    rows = []
    with tempfile.TemporaryDirectory() as root:
        counter = iter(range(1_000_000))

        def cold() -> None:  # a new source each time: the in-process session keeps each source's module
            k = next(counter)
            os.environ["IRONACCEL_SLANG_CACHE_DIR"] = os.path.join(root, f"cold{k}")
            compiler.clear_memory()
            Slang(SOURCE + f"// {k}\n").compile(backend, "saxpy")

        slangc = compiler.find_slangc() or ""
        via = "in process, a Slang session per target" if inprocess.enabled() and inprocess.find_library(slangc) \
            else "a slangc run"
        rows.append((f"ironaccel: compile cold ({via})", median_ms(cold, runs)))
        os.environ["IRONACCEL_SLANG_CACHE_DIR"] = os.path.join(root, "warm")
        Slang(SOURCE).compile(backend, "saxpy")

        def disk() -> None:
            compiler.clear_memory()
            Slang(SOURCE).compile(backend, "saxpy")

        rows.append(("ironaccel: compile from the disk cache", median_ms(disk, runs)))
        rows.append(("ironaccel: compile from memory", median_ms(lambda: Slang(SOURCE).compile(backend, "saxpy"),
                                                                 runs * 20)))
        source = Slang(SOURCE)
        dev.pipeline(source, "saxpy", buffers=2)
        rows.append(("ironaccel: device.pipeline() again", median_ms(
            lambda: dev.pipeline(source, "saxpy", buffers=2), runs * 20)))
        compiler.clear_memory()

        def cold_pipeline() -> None:
            os.environ["IRONACCEL_SLANG_CACHE_DIR"] = os.path.join(root, f"cold{next(counter)}")
            compiler.clear_memory()
            dev.pipeline(Slang(SOURCE + f"// {next(counter)}\n"), "saxpy", buffers=2)

        rows.append((f"ironaccel: device.pipeline() cold (compile {via} + driver)", median_ms(cold_pipeline, runs)))
        x = np.arange(N, dtype=np.float32)
        ys, xs = dev.upload(np.zeros(N, np.float32)), dev.upload(x)

        def first_result() -> None:  # what a user waits for: new source to its first dispatch's result
            os.environ["IRONACCEL_SLANG_CACHE_DIR"] = os.path.join(root, f"cold{next(counter)}")
            compiler.clear_memory()
            pipeline = dev.pipeline(Slang(SOURCE + f"// {next(counter)}\n"), "saxpy", buffers=2)
            dev.dispatch(pipeline, [ys, xs], N // 64, {"a": 1.0, "n": N})
            dev.synchronize()

        rows.append((FIRST_RESULT.format("ironaccel", "device.pipeline"), median_ms(first_result, runs)))
        ys.close()
        xs.close()
    if spy_device is not None:
        fresh = iter(range(1_000_000))

        def spy_cold() -> None:
            k = next(fresh)
            slangpy_kernel(spy_device, f"bench_saxpy_cold{k}", SOURCE + f"// {k}\n")

        rows.append(("slangpy: load + link + create kernel, a new module each time", median_ms(spy_cold, runs)))
        rows.append(("slangpy: load + link + create kernel, the same module again",
                     median_ms(lambda: slangpy_kernel(spy_device), runs)))
        import slangpy as spy

        usage = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
        sy = spy_device.create_buffer(element_count=N, struct_size=4, usage=usage, data=np.zeros(N, np.float32))
        sx = spy_device.create_buffer(element_count=N, struct_size=4, usage=usage, data=np.arange(N, dtype=np.float32))

        def spy_first_result() -> None:  # slangpy may build the target code at the first dispatch: time to it
            k = next(fresh)
            kernel = slangpy_kernel(spy_device, f"bench_saxpy_first{k}", SOURCE + f"// first {k}\n")
            kernel.dispatch(thread_count=[N, 1, 1], y=sy, x=sx, a=1.0, n=N)
            spy_device.wait_for_idle()

        rows.append((FIRST_RESULT.format("slangpy", "load + link + create kernel"),
                     median_ms(spy_first_result, runs)))
    return rows


def ironaccel_case(dev: Any, pipeline: Any, by_name: bool = True) -> Case:
    """`pipeline` dispatched over y, x with a changing `a` and waited for; params by name, or in order for a
    pipeline from the compiled code (whose params are slangc's names for them)."""
    x = np.arange(N, dtype=np.float32)
    ys, xs = dev.upload(np.zeros(N, np.float32)), dev.upload(x)
    step = iter(range(1 << 62))

    def once() -> None:
        a = float(next(step) % 7)
        dev.dispatch(pipeline, [ys, xs], N // 64, {"a": a, "n": N} if by_name else (a, N))
        dev.synchronize()

    def check() -> None:
        out = dev.upload(np.ones(N, np.float32))
        dev.dispatch(pipeline, [out, xs], N // 64, {"a": 2.0, "n": N} if by_name else (2.0, N))
        got = dev.download(out)
        out.close()
        if not np.array_equal(got, 2 * x + 1):
            raise AssertionError("ironaccel's saxpy is wrong")

    def close() -> None:
        ys.close()
        xs.close()

    return Case(run=repeat(once), check=check, close=close)


def slangpy_case(device: Any) -> Case:
    import slangpy as spy

    kernel = slangpy_kernel(device)
    usage = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access
    x = np.arange(N, dtype=np.float32)
    ys = device.create_buffer(element_count=N, struct_size=4, usage=usage, data=np.zeros(N, np.float32))
    xs = device.create_buffer(element_count=N, struct_size=4, usage=usage, data=x)
    step = iter(range(1 << 62))

    def once() -> None:
        kernel.dispatch(thread_count=[N, 1, 1], y=ys, x=xs, a=float(next(step) % 7), n=N)
        device.wait_for_idle()

    def check() -> None:
        out = device.create_buffer(element_count=N, struct_size=4, usage=usage, data=np.ones(N, np.float32))
        kernel.dispatch(thread_count=[N, 1, 1], y=out, x=xs, a=2.0, n=N)
        if not np.array_equal(out.to_numpy().view(np.float32), 2 * x + 1):
            raise AssertionError("slangpy's saxpy is wrong")

    return Case(run=repeat(once), check=check)


def ironaccel_batch_case(dev: Any, pipeline: Any) -> Case:
    """BATCH saxpy dispatches, `a` = k % 7 for the k-th, recorded once and re-submitted; y is refilled first."""
    x = np.arange(N, dtype=np.float32)
    ys, xs = dev.upload(np.zeros(N, np.float32)), dev.upload(x)
    batch = dev.batch()
    batch.fill(ys, 0)
    for k in range(BATCH):
        batch.dispatch(pipeline, [ys, xs], N // 64, {"a": float(k % 7), "n": N})

    def check() -> None:
        dev.submit(batch).wait()
        if not np.array_equal(dev.download(ys), sum(k % 7 for k in range(BATCH)) * x):
            raise AssertionError("ironaccel's batch is wrong")

    def close() -> None:
        batch.close()
        ys.close()
        xs.close()

    return Case(run=repeat(lambda: dev.submit(batch).wait()), check=check, close=close)


def slangpy_batch_case(device: Any) -> Case:
    import slangpy as spy

    kernel = slangpy_kernel(device)
    usage = spy.BufferUsage.shader_resource | spy.BufferUsage.unordered_access | spy.BufferUsage.copy_destination
    x = np.arange(N, dtype=np.float32)
    ys = device.create_buffer(element_count=N, struct_size=4, usage=usage, data=np.zeros(N, np.float32))
    xs = device.create_buffer(element_count=N, struct_size=4, usage=usage, data=x)

    def once() -> None:
        encoder = device.create_command_encoder()
        encoder.clear_buffer(ys)
        for k in range(BATCH):
            kernel.dispatch(thread_count=[N, 1, 1], command_encoder=encoder, y=ys, x=xs, a=float(k % 7), n=N)
        device.submit_command_buffer(encoder.finish())
        device.wait_for_idle()

    def check() -> None:
        once()
        if not np.array_equal(ys.to_numpy().view(np.float32), sum(k % 7 for k in range(BATCH)) * x):
            raise AssertionError("slangpy's batch is wrong")

    return Case(run=repeat(once), check=check)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="vulkan")
    parser.add_argument("--pairs", type=int, default=41)
    parser.add_argument("--compiles", type=int, default=7)
    parser.add_argument("--json")
    parser.add_argument("--no-baseline", action="store_true", help="do not overwrite bench/BASELINE.md")
    parser.add_argument("--compile-only", action="store_true",
                        help="only the compile rows, printed (a partial run: BASELINE.md is left as it is)")
    args = parser.parse_args()

    dev = ironaccel.open(args.backend, 0)
    spy_device, why = open_slangpy(args.backend)
    compiles = compile_rows(dev, args.backend, spy_device, args.compiles)
    if args.compile_only:
        print(f"{args.backend} on {dev.descriptor.name}; slangpy: {why or 'on the same device'}")
        print("\n".join(["| compile | median ms |", "|---|---:|"] + [f"| {n} | {ms:,.2f} |" for n, ms in compiles]))
        dev.close()
        return
    source = Slang(SOURCE)
    ours = dev.pipeline(source, "saxpy", buffers=2)
    if spy_device is not None:
        peer, direct = f"slangpy on {spy_device.info.adapter_name}", slangpy_case(spy_device)
    else:  # what the Slang layer costs a dispatch: the same SPIR-V as the device's own pipeline
        compiled = source.compile(args.backend, "saxpy")
        peer = "ironaccel's own pipeline of the same compiled code (no Slang layer): " + why
        direct = ironaccel_case(dev, dev.pipeline(compiled.code, compiled.entry, buffers=2, params=2), False)
    # params by name against slangpy (its dispatch keywords are by name), in order against our own pipeline
    case = compare("saxpy 1024 float32: dispatch + wait", ironaccel_case(dev, ours, spy_device is not None),
                   direct, rounds=args.pairs,
                   target=DISPATCH_TARGET)
    cases = [case]
    if spy_device is not None:
        cases.append(compare(f"saxpy 1024 float32: {BATCH} dispatches in one submit + wait",
                             ironaccel_batch_case(dev, ours), slangpy_batch_case(spy_device), rounds=args.pairs,
                             target=DISPATCH_TARGET))
    doc = report(args.backend, dev.descriptor.name, peer, {"slangpy": why or "on the same device"}, cases)
    doc["compile_ms"] = dict(compiles)
    lines = ["| compile | median ms |", "|---|---:|"] + [f"| {name} | {ms:,.2f} |" for name, ms in compiles]
    text = markdown(doc) + "\n" + "\n".join(lines) + "\n"
    print(text)
    if args.json:
        import json

        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    if not args.no_baseline:
        write_baseline(Path(__file__).with_name("BASELINE.md"), text,
                       machine=f"{dev.descriptor.name} on {doc['host']} (Python {doc['python']})",
                       section=None if args.backend == "vulkan" else f"bench_slang.py --backend {args.backend}")
    dev.close()


if __name__ == "__main__":
    main()
