"""Experiment (CPU only): median Slang compile per target, cold and from the disk cache; slangpy's new-module load.

    python ironaccel-slang/bench/experiments/compile_paths.py [--runs 21] [--slangpy]

cold: a new source each time (a comment appended), the disk cache off (IRONACCEL_SLANG_CACHE=0) and the memory
cache cleared, so each is a compile (in process where Slang's library is beside slangc, else a slangc run); the
first compile, which makes the global session, is not counted.  disk: the same source again after
`compiler.clear_memory()`, its entry on disk (what a new process's first compile of a known kernel costs, less
the import).  --slangpy: slangpy's `load_module_from_source` + `link_program` + `create_compute_kernel` of a new
module each time on its CPU device (run this with a Python that has slangpy).  That device builds a kernel's
host code at its first dispatch, not at kernel creation, so its row is Slang's front end and linking only; the
ironaccel rows include the target code's generation.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

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
TARGETS = ("vulkan", "webgpu", "opengl", "cuda")


def median_ms(op: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        op()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e6


def ironaccel_rows(runs: int) -> list[tuple[str, float]]:
    from ironaccel_slang import Slang, compiler, inprocess

    slangc = compiler.find_slangc() or ""
    via = "in process" if inprocess.enabled() and inprocess.find_library(slangc) else "slangc"
    counter = iter(range(1 << 30))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        os.environ["IRONACCEL_SLANG_CACHE_DIR"] = folder
        os.environ["IRONACCEL_SLANG_CACHE"] = "0"
        Slang(SOURCE + "// the global session\n").compile("vulkan", "saxpy")
        for target in TARGETS:
            def cold(target: str = target) -> None:
                compiler.clear_memory()
                Slang(SOURCE + f"// {next(counter)}\n").compile(target, "saxpy")

            rows.append((f"{target}: cold ({via})", median_ms(cold, runs)))
        os.environ["IRONACCEL_SLANG_CACHE"] = "1"
        for target in TARGETS:
            Slang(SOURCE).compile(target, "saxpy")

            def disk(target: str = target) -> None:
                compiler.clear_memory()
                Slang(SOURCE).compile(target, "saxpy")

            rows.append((f"{target}: from the disk cache", median_ms(disk, runs)))
    return rows


def slangpy_rows(runs: int) -> list[tuple[str, float]]:
    import slangpy as spy

    device = spy.Device(type=spy.DeviceType.cpu, enable_hot_reload=False)
    counter = iter(range(1 << 30))

    def load(name: str, source: str) -> object:
        module = device.load_module_from_source(name, source)
        return device.create_compute_kernel(device.link_program([module], [module.entry_point("saxpy")]))

    load("warm", SOURCE)

    def cold() -> None:
        k = next(counter)
        load(f"cold{k}", SOURCE + f"// {k}\n")

    return [(f"slangpy {spy.__version__} cpu: load + link + create kernel, a new module", median_ms(cold, runs))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--slangpy", action="store_true")
    args = parser.parse_args()
    rows = slangpy_rows(args.runs) if args.slangpy else ironaccel_rows(args.runs)
    for name, ms in rows:
        print(f"| {name} | {ms:.2f} |")


if __name__ == "__main__":
    main()
