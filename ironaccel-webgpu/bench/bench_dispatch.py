"""Benchmark (not a test): ironaccel's webgpu ComputeDevice against the same work written directly on wgpu-py.

    python ironaccel-webgpu/bench/bench_dispatch.py [--ordinal N] [--pairs N] [--json out.json]

The cases (bench/dispatch_cases.py): round_trip, repeated and burst50 on 4 KiB, round_trip and repeated
on 64 MiB of float32.  Direct use is what a wgpu-py programmer writes: create_buffer_with_data, one bind
group per buffer pair (built once for the persistent buffers), queue.write_buffer for the params,
queue.read_buffer to read back.  Both sides are checked once, then sampled together in rounds
(bench/harness.py: batches of ~2 ms, the order alternating); each case reports ironaccel / direct time
with its bootstrap 95% interval against its target (bench/versus.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from dispatch_cases import ComputeSide, F, grid, pack_params, run_cases, scale
from versus import publish, report

WGSL = (Path(__file__).resolve().parents[1] / "tests" / "kernels" / "scale_offset.wgsl").read_text()


class Direct:
    """The same work on wgpu-py directly."""

    def __init__(self, wgpu: Any, adapter: Any):
        limits = {k: v for k, v in adapter.limits.items()
                  if k in ("max-buffer-size", "max-storage-buffer-binding-size")}
        self.device = adapter.request_device_sync(required_limits=limits)
        self.queue = self.device.queue
        stage = wgpu.ShaderStage.COMPUTE
        self.layout = self.device.create_bind_group_layout(entries=[
            {"binding": 0, "visibility": stage, "buffer": {"type": "read-only-storage"}},
            {"binding": 1, "visibility": stage, "buffer": {"type": "storage"}},
            {"binding": 2, "visibility": stage, "buffer": {"type": "uniform"}},
        ])
        self.pipeline = self.device.create_compute_pipeline(
            layout=self.device.create_pipeline_layout(bind_group_layouts=[self.layout]),
            compute={"module": self.device.create_shader_module(code=WGSL), "entry_point": "main"})
        self.uniform = self.device.create_buffer(size=16, usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
        self.usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST

    def buffers(self, x: np.ndarray) -> tuple[Any, Any, Any]:
        xb = self.device.create_buffer_with_data(data=x, usage=self.usage)
        yb = self.device.create_buffer(size=x.nbytes, usage=self.usage)
        group = self.device.create_bind_group(layout=self.layout, entries=[
            {"binding": 0, "resource": {"buffer": xb, "offset": 0, "size": xb.size}},
            {"binding": 1, "resource": {"buffer": yb, "offset": 0, "size": yb.size}},
            {"binding": 2, "resource": {"buffer": self.uniform, "offset": 0, "size": 16}},
        ])
        return xb, yb, group

    def dispatch(self, group: Any, n: int, a: float, b: float) -> None:
        self.queue.write_buffer(self.uniform, 0, pack_params(a, b, n, 0))
        encoder = self.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(self.pipeline)
        compute.set_bind_group(0, group)
        compute.dispatch_workgroups(*grid(n), 1)
        compute.end()
        self.queue.submit([encoder.finish()])

    def read(self, yb: Any) -> np.ndarray:
        return np.frombuffer(self.queue.read_buffer(yb), F)

    def round_trip(self, x: np.ndarray) -> np.ndarray:
        xb, yb, group = self.buffers(x)
        self.dispatch(group, x.size, 2.0, 1.0)
        y = self.read(yb)
        xb.destroy()
        yb.destroy()
        return y

    def persistent(self, x: np.ndarray) -> tuple[Callable[[int], np.ndarray], Callable[[], None]]:
        n = x.size
        xb, yb, group = self.buffers(x)

        def run(dispatches: int) -> np.ndarray:
            for k in range(dispatches):
                self.dispatch(group, n, scale(k), 1.0)
            return self.read(yb)

        def close() -> None:
            xb.destroy()
            yb.destroy()

        return run, close


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ordinal", type=int, default=0, help="webgpu adapter (see `python -m ironaccel webgpu`)")
    parser.add_argument("--pairs", type=int, default=41, help="rounds per 4 KiB case (64 MiB cases: a fifth, >= 5)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--no-baseline", action="store_true", help="do not overwrite bench/BASELINE.md")
    args = parser.parse_args(argv)
    if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="ironaccel-xdg-")

    import wgpu

    import ironaccel

    dev = ironaccel.open("webgpu", args.ordinal)
    adapter = ironaccel.backend("webgpu")._state()[1][args.ordinal].adapter  # the same adapter, for direct use
    try:
        cases = run_cases(ComputeSide(dev, WGSL), Direct(wgpu, adapter), args.pairs)
    finally:
        dev.close()
    extras = dev.descriptor.extras
    facts = {"adapter": args.ordinal, "backend_type": extras.get("backend_type", ""),
             "driver": extras.get("driver", "")}
    publish(report("webgpu", dev.descriptor.name, f"wgpu {wgpu.__version__}", facts, cases), args.json,
            baseline=None if args.no_baseline else Path(__file__).with_name("BASELINE.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
