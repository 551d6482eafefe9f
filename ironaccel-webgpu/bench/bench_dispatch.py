"""Benchmark (not a test): ironaccel's webgpu ComputeDevice against the same work written directly on wgpu-py.

    python ironaccel-webgpu/bench/bench_dispatch.py [--ordinal N] [--pairs N] [--json out.json]

Cases, on a small buffer (4 KiB) and on 64 MiB of float32:
  round_trip  upload x, allocate y, dispatch y = a*x + b, download y, free both (fresh buffers each time)
  repeated    the same buffers and pipeline each time, new params each time: dispatch + download
and burst50: 50 dispatches on the small buffers, then one download.

Direct use is what a wgpu-py programmer writes: create_buffer_with_data, one bind group per buffer
pair (built once in `repeated`), queue.write_buffer for the params, queue.read_buffer to read back.
Each case runs interleaved A/B pairs (order alternating); the figure is the median per-pair ratio
ironaccel/direct.  Targets: round trip within 1.15x, repeated no slower (ratio <= 1 within noise).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

WGSL = (Path(__file__).resolve().parents[1] / "tests" / "kernels" / "scale_offset.wgsl").read_text()
SMALL, LARGE = 1024, 16 << 20  # float32 elements: 4 KiB and 64 MiB
F = np.float32


def grid(n: int) -> tuple[int, int]:
    """Workgroups of 64 for n elements, as rows of at most 4096 (the kernel continues the index per row)."""
    groups = (n + 63) // 64
    return (groups, 1) if groups <= 4096 else (4096, (groups + 4095) // 4096)


def pairs(run_a: Callable[[], Any], run_b: Callable[[], Any], count: int) -> dict[str, float]:
    """Interleaved A/B timing: medians of each side and the median per-pair ratio a/b."""
    run_a()
    run_b()  # warm up
    ta, tb, ratios = [], [], []
    for i in range(count):
        took = {}
        for name, fn in (("a", run_a), ("b", run_b)) if i % 2 == 0 else (("b", run_b), ("a", run_a)):
            start = time.perf_counter()
            fn()
            took[name] = time.perf_counter() - start
        ta.append(took["a"])
        tb.append(took["b"])
        ratios.append(took["a"] / took["b"])
    return {"ironaccel_ms": statistics.median(ta) * 1e3, "direct_ms": statistics.median(tb) * 1e3,
            "ratio": statistics.median(ratios), "pairs": count}


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

    def run(self, group: Any, n: int, a: float, b: float) -> None:
        params = np.array([a, b, 0, 0], F)
        params.view(np.uint32)[2] = n
        self.queue.write_buffer(self.uniform, 0, params)
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
        self.run(group, x.size, 2.0, 1.0)
        y = self.read(yb)
        xb.destroy()
        yb.destroy()
        return y


class Ours:
    """The same work through ironaccel's ComputeDevice."""

    def __init__(self, dev: Any):
        self.dev = dev
        self.pipe = dev.pipeline(WGSL, buffers=2, params=3)

    def round_trip(self, x: np.ndarray) -> np.ndarray:
        xs, ys = self.dev.upload(x), self.dev.alloc(x.size)
        self.dev.dispatch(self.pipe, [xs, ys], grid(x.size), (F(2), F(1), np.uint32(x.size)))
        y = self.dev.download(ys)
        xs.close()
        ys.close()
        return y


def bench_round_trip(ours: Ours, direct: Direct, x: np.ndarray, count: int) -> dict[str, float]:
    expect = F(2) * x + F(1)
    np.testing.assert_allclose(ours.round_trip(x), expect, rtol=1e-6)
    np.testing.assert_allclose(direct.round_trip(x), expect, rtol=1e-6)
    return pairs(lambda: ours.round_trip(x), lambda: direct.round_trip(x), count)


def bench_repeated(ours: Ours, direct: Direct, x: np.ndarray, count: int, dispatches: int = 1) -> dict[str, float]:
    """`dispatches` dispatches with changing params on persistent buffers, then one download."""
    n, dev = x.size, ours.dev
    xs, ys, out = dev.upload(x), dev.alloc(n), np.empty(n, F)
    dx, dy, group = direct.buffers(x)

    def ia() -> np.ndarray:
        for k in range(dispatches):
            dev.dispatch(ours.pipe, [xs, ys], grid(n), (F(k % 7), F(1), np.uint32(n)))
        return dev.download(ys, out)

    def raw() -> np.ndarray:
        for k in range(dispatches):
            direct.run(group, n, float(k % 7), 1.0)
        return direct.read(dy)

    np.testing.assert_array_equal(ia(), raw())
    result = pairs(ia, raw, count)
    xs.close()
    ys.close()
    dx.destroy()
    dy.destroy()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ordinal", type=int, default=0, help="webgpu adapter (see `python -m ironaccel webgpu`)")
    parser.add_argument("--pairs", type=int, default=41, help="A/B pairs per small case (64 MiB cases: a fifth)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="ironaccel-xdg-")

    import wgpu

    import ironaccel

    dev = ironaccel.open("webgpu", args.ordinal)
    adapter = ironaccel.backend("webgpu")._load()[args.ordinal].adapter  # the same adapter, for direct use
    ours, direct = Ours(dev), Direct(wgpu, adapter)
    rng = np.random.default_rng(0)
    small = rng.standard_normal(SMALL).astype(F)
    large = rng.standard_normal(LARGE).astype(F)
    few = max(5, args.pairs // 5)
    cases = {
        "round_trip_4KiB": bench_round_trip(ours, direct, small, args.pairs),
        "repeated_4KiB": bench_repeated(ours, direct, small, args.pairs),
        "burst50_4KiB": bench_repeated(ours, direct, small, args.pairs, dispatches=50),
        "round_trip_64MiB": bench_round_trip(ours, direct, large, few),
        "repeated_64MiB": bench_repeated(ours, direct, large, few),
    }
    dev.close()
    results = {"backend": "webgpu", "device": dev.descriptor.name, "binding": f"wgpu {wgpu.__version__}",
               "cases": cases}
    print(f"webgpu on {results['device']} ({results['binding']}), medians of interleaved A/B pairs")
    print(f"{'case':<20}{'ironaccel ms':>14}{'direct ms':>12}{'ratio':>8}{'pairs':>7}")
    for case, r in cases.items():
        print(f"{case:<20}{r['ironaccel_ms']:>14.3f}{r['direct_ms']:>12.3f}{r['ratio']:>8.3f}{r['pairs']:>7}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
