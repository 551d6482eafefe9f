"""Experiment (adopted in batch.Recording.submit): encoding 100 dispatches through wgpu-native's pass functions
against wgpu-py's methods (set_bind_group builds a cffi offsets array and checks errors per call).

    python ironaccel-webgpu/bench/experiments/native_pass_calls.py [--rounds 15]

Prints the median and range of (native time / wgpu-py time) over interleaved rounds of 50 encodes each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="ironaccel-xdg-")
    import bench_batch
    import wgpu
    from wgpu.backends.wgpu_native._ffi import ffi, lib

    import ironaccel

    device = ironaccel.open("webgpu", 0)
    direct = bench_batch.Direct(wgpu, device.gpu, 100)
    set_group, dispatch = lib.wgpuComputePassEncoderSetBindGroup, lib.wgpuComputePassEncoderDispatchWorkgroups
    handles = [g._internal for g in direct.groups]
    groups = bench_batch.N // 64

    def native() -> None:
        encoder = direct.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(direct.pipeline)
        raw = compute._internal
        for handle in handles:
            set_group(raw, 0, handle, 0, ffi.NULL)
            dispatch(raw, groups, 1, 1)
        compute.end()
        encoder.finish()

    def methods() -> None:
        encoder = direct.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(direct.pipeline)
        for group in direct.groups:
            compute.set_bind_group(0, group)
            compute.dispatch_workgroups(groups, 1, 1)
        compute.end()
        encoder.finish()

    def timed(fn: object, n: int = 50) -> float:
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()  # type: ignore[operator]
        return (time.perf_counter_ns() - start) / n

    for fn in (native, methods):
        timed(fn, 5)
    ratios = []
    for k in range(args.rounds):
        a, b = (timed(native), timed(methods)) if k % 2 == 0 else tuple(reversed((timed(methods), timed(native))))
        ratios.append(a / b)
    print(f"native / wgpu-py encode of 100 dispatches: median {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f}..{max(ratios):.3f}, {args.rounds} rounds, {device.descriptor.name})")
    direct.close()
    device.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
