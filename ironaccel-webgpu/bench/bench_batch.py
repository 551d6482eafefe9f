"""Benchmark (not a test): ironaccel's WebGPU command batches against plain dispatches and against wgpu-py.

    python ironaccel-webgpu/bench/bench_batch.py [--ordinal N] [--pairs N] [--dispatches N] [--json out.json]

One operation is 100 small dispatches (the conformance kernel y = a * x + b on 1024 float32, `a` different
each dispatch) followed by a wait until they have finished.  Cases (bench/versus.py: interleaved rounds,
ratio of times per operation with its bootstrap 95% interval):

* batch_vs_plain: the 100 dispatches recorded once in a batch and submitted (`device.submit(batch).wait()`)
  against 100 `device.dispatch` calls and `device.synchronize()`; target <= 0.2 (5x faster).
* batch_vs_same_calls: the batch against wgpu-py making the calls the batch's submit makes: one command
  encoder, one compute pass, set_bind_group + dispatch_workgroups per dispatch (bind groups built once, each
  with its params at its own uniform offset), one queue.submit.  A finished WebGPU command buffer cannot be
  submitted again (it is consumed by queue.submit), so the direct side encodes each submit too, as the
  batch does; target <= 1.1.
* batch_vs_encoder: the batch against what a wgpu-py program writes without batches: per dispatch
  queue.write_buffer of its params and an encoder, pass and queue.submit of its own; target <= 1.0 (ahead).

The direct side runs on ironaccel's own wgpu device (`device.gpu`), so both share one queue and nothing of a
second device (on lavapipe: its worker threads) runs beside either.  It waits as ironaccel does (wgpu-py
0.32's on_submitted_work_done is unusable): a one-word clear submitted after the work and a MAP_READ mapping.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from harness import Case
from versus import compare, publish, repeat, report

WGSL = (Path(__file__).resolve().parents[1] / "tests" / "kernels" / "scale_offset.wgsl").read_text()
N = 1024
pack = struct.Struct("<ffII").pack


def scale(k: int) -> float:
    return float(1 + k % 7)


class Ours:
    """The ironaccel side: one batch of `count` dispatches, and the same dispatches made one by one."""

    def __init__(self, device: Any, count: int):
        self.device, self.count = device, count
        self.pipeline = device.pipeline(WGSL, buffers=2, params=3)
        self.data = np.arange(N, dtype=np.float32)
        self.x, self.y = device.upload(self.data), device.alloc(N)
        self.batch = device.batch()
        for k in range(count):
            self.batch.dispatch(self.pipeline, [self.x, self.y], N // 64, (scale(k), 1.0, N))

    def submit(self) -> None:
        self.device.submit(self.batch).wait()

    def plain(self) -> None:
        device, pipeline, buffers = self.device, self.pipeline, [self.x, self.y]
        for k in range(self.count):
            device.dispatch(pipeline, buffers, N // 64, (scale(k), 1.0, N))
        device.synchronize()

    def check(self) -> None:
        self.device.write(self.y, np.zeros(N, np.float32))
        self.submit()
        expected = np.float32(scale(self.count - 1)) * self.data + 1
        np.testing.assert_array_equal(self.device.download(self.y), expected)

    def close(self) -> None:
        self.batch.close()
        self.x.close()
        self.y.close()


class Direct:
    """The same work on wgpu-py directly (see the module docstring)."""

    def __init__(self, wgpu: Any, gpu_device: Any, count: int):
        self.device = gpu_device
        self.queue = self.device.queue
        self.count = count
        usage = wgpu.BufferUsage
        stage = wgpu.ShaderStage.COMPUTE
        layout = self.device.create_bind_group_layout(entries=[
            {"binding": 0, "visibility": stage, "buffer": {"type": "read-only-storage"}},
            {"binding": 1, "visibility": stage, "buffer": {"type": "storage"}},
            {"binding": 2, "visibility": stage, "buffer": {"type": "uniform"}},
        ])
        self.pipeline = self.device.create_compute_pipeline(
            layout=self.device.create_pipeline_layout(bind_group_layouts=[layout]),
            compute={"module": self.device.create_shader_module(code=WGSL), "entry_point": "main"})
        self.data = np.arange(N, dtype=np.float32)
        store = usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
        self.x = self.device.create_buffer_with_data(data=self.data, usage=store)
        self.y = self.device.create_buffer(size=N * 4, usage=store)
        align = max(16, int(self.device.limits["min-uniform-buffer-offset-alignment"]))
        # per-dispatch params at their own offsets, written once (what the batch's recording holds)
        params = bytearray(align * count)
        for k in range(count):
            params[k * align: k * align + 16] = pack(scale(k), 1.0, N, 0)
        self.uniforms = self.device.create_buffer_with_data(data=bytes(params), usage=usage.UNIFORM)
        self.groups = [self.device.create_bind_group(layout=layout, entries=[
            {"binding": 0, "resource": {"buffer": self.x, "offset": 0, "size": N * 4}},
            {"binding": 1, "resource": {"buffer": self.y, "offset": 0, "size": N * 4}},
            {"binding": 2, "resource": {"buffer": self.uniforms, "offset": k * align, "size": 16}},
        ]) for k in range(count)]
        # the encoder-per-dispatch side: one uniform written before each dispatch
        self.uniform = self.device.create_buffer(size=16, usage=usage.UNIFORM | usage.COPY_DST)
        self.group = self.device.create_bind_group(layout=layout, entries=[
            {"binding": 0, "resource": {"buffer": self.x, "offset": 0, "size": N * 4}},
            {"binding": 1, "resource": {"buffer": self.y, "offset": 0, "size": N * 4}},
            {"binding": 2, "resource": {"buffer": self.uniform, "offset": 0, "size": 16}},
        ])
        self.fence = self.device.create_buffer(size=4, usage=usage.MAP_READ | usage.COPY_DST)
        self.read_mode = wgpu.MapMode.READ

    def wait(self) -> None:
        encoder = self.device.create_command_encoder()
        encoder.clear_buffer(self.fence, 0, 4)
        self.queue.submit([encoder.finish()])
        self.fence.map_async(self.read_mode, 0, 4).sync_wait()
        self.fence.unmap()

    def same_calls(self) -> None:
        encoder = self.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(self.pipeline)
        for group in self.groups:
            compute.set_bind_group(0, group)
            compute.dispatch_workgroups(N // 64, 1, 1)
        compute.end()
        self.queue.submit([encoder.finish()])
        self.wait()

    def encoder_each(self) -> None:
        device, queue, pipeline, group, uniform = self.device, self.queue, self.pipeline, self.group, self.uniform
        for k in range(self.count):
            queue.write_buffer(uniform, 0, pack(scale(k), 1.0, N, 0))
            encoder = device.create_command_encoder()
            compute = encoder.begin_compute_pass()
            compute.set_pipeline(pipeline)
            compute.set_bind_group(0, group)
            compute.dispatch_workgroups(N // 64, 1, 1)
            compute.end()
            queue.submit([encoder.finish()])
        self.wait()

    def check(self, run: Any) -> None:
        self.queue.write_buffer(self.y, 0, np.zeros(N, np.float32))
        run()
        got = np.frombuffer(self.queue.read_buffer(self.y), np.float32)
        np.testing.assert_array_equal(got, np.float32(scale(self.count - 1)) * self.data + 1)

    def close(self) -> None:
        for buffer in (self.x, self.y, self.uniforms, self.uniform, self.fence):
            buffer.destroy()


def main(argv: list[str] | None = None) -> int:
    global N
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ordinal", type=int, default=0, help="webgpu adapter (see `python -m ironaccel webgpu`)")
    parser.add_argument("--pairs", type=int, default=21, help="rounds per case")
    parser.add_argument("--dispatches", type=int, default=100, help="dispatches per batch")
    parser.add_argument("--elements", type=int, default=N, help="float32 per dispatch (a multiple of 64)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    N = max(64, args.elements // 64 * 64)
    if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="ironaccel-xdg-")
    import wgpu

    import ironaccel

    dev = ironaccel.open("webgpu", args.ordinal)
    ours = Ours(dev, args.dispatches)
    direct = Direct(wgpu, dev.gpu, args.dispatches)  # the same wgpu device: one queue, no second device's work
    count = args.dispatches
    try:
        cases = [
            compare(f"batch{count}_vs_plain{count}", Case(repeat(ours.submit), check=ours.check),
                    Case(repeat(ours.plain)), rounds=args.pairs, target=0.2),
            compare(f"batch{count}_vs_same_calls", Case(repeat(ours.submit)),
                    Case(repeat(direct.same_calls), check=lambda: direct.check(direct.same_calls)),
                    rounds=args.pairs, target=1.1),
            compare(f"batch{count}_vs_encoder_each", Case(repeat(ours.submit)),
                    Case(repeat(direct.encoder_each), check=lambda: direct.check(direct.encoder_each)),
                    rounds=args.pairs, target=1.0),
        ]
    finally:
        ours.close()
        direct.close()
        dev.close()
    extras = dev.descriptor.extras
    facts = {"adapter": args.ordinal, "backend_type": extras.get("backend_type", ""),
             "driver": extras.get("driver", ""), "dispatches": count, "elements": N,
             "first_case": "direct = the same dispatches made one by one with device.dispatch (ironaccel)"}
    publish(report("webgpu", dev.descriptor.name, f"wgpu {wgpu.__version__}", facts, cases), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
