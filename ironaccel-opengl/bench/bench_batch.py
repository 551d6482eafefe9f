"""Benchmark (not a test): ironaccel's OpenGL command batches against plain dispatches and against moderngl.

    python ironaccel-opengl/bench/bench_batch.py [--pairs N] [--dispatches N] [--json out.json]

One operation is 100 small dispatches (the conformance kernel y = a * x + b on 1024 float32, `a` different
each dispatch) followed by a wait until they have finished.  Cases (bench/versus.py: interleaved rounds,
ratio of times per operation with its bootstrap 95% interval):

* batch_vs_plain: the dispatches recorded once in a batch and submitted (`device.submit(batch).wait()`)
  against as many `device.dispatch` calls and `device.synchronize()`.  GL has no command buffers: a submit
  replays the recorded GL calls, so what a batch saves is the kit's per-call checks, not the GL calls;
  target <= 1.0 (no slower), not the 5x of APIs with command buffers.
* batch_vs_moderngl: the batch against moderngl making the same GL calls itself, on the device's own
  context: per dispatch the params uniform written, buffers bound, run, memory_barrier; then glFinish;
  target <= 1.1.
* fence_vs_finish: what an emulated fence costs: one dispatch, `queue.signal(fence, v)` and `fence.wait(v)`
  (a glFenceSync made on demand and glClientWaitSync) against the same dispatch by moderngl and glFinish;
  target <= 1.1.
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

GLSL = (Path(__file__).resolve().parents[1] / "tests" / "kernels" / "scale_offset.comp").read_text()
N = 1024
pack = struct.Struct("<ffII").pack


def scale(k: int) -> float:
    return float(1 + k % 7)


class Ours:
    """The ironaccel side: one batch of `count` dispatches, and the same dispatches made one by one."""

    def __init__(self, device: Any, count: int):
        self.device, self.count = device, count
        self.pipeline = device.pipeline(GLSL, buffers=2, params=3)
        self.data = np.arange(N, dtype=np.float32)
        self.x, self.y = device.upload(self.data), device.alloc(N)
        self.params = [(np.float32(scale(k)), np.float32(1.0), np.uint32(N)) for k in range(count)]
        self.fence, self.value = device.create_fence(), 0
        self.batch = device.batch()
        for params in self.params:
            self.batch.dispatch(self.pipeline, [self.x, self.y], N // 64, params)

    def submit(self) -> None:
        self.device.submit(self.batch).wait()

    def plain(self) -> None:
        device, pipeline, buffers = self.device, self.pipeline, [self.x, self.y]
        for params in self.params:
            device.dispatch(pipeline, buffers, N // 64, params)
        device.synchronize()

    def fenced(self) -> None:
        self.device.dispatch(self.pipeline, [self.x, self.y], N // 64, self.params[0])
        self.value += 1
        self.device.queue.signal(self.fence, self.value)
        self.fence.wait(self.value)

    def check(self) -> None:
        for run in (self.submit, self.plain):
            self.device.write(self.y, np.zeros(N, np.float32))
            run()
            expected = np.float32(scale(self.count - 1)) * self.data + 1
            np.testing.assert_array_equal(self.device.download(self.y), expected)

    def close(self) -> None:
        self.fence.close()
        self.batch.close()
        self.x.close()
        self.y.close()


class Direct:
    """The same GL calls through moderngl on the device's context (made current around each operation)."""

    def __init__(self, moderngl: Any, ctx: Any, count: int):
        self.ctx = ctx
        self.shader = ctx.compute_shader(GLSL)
        self.uniform = ctx.buffer(reserve=16)
        self.data = np.arange(N, dtype=np.float32)
        self.x, self.y = ctx.buffer(self.data), ctx.buffer(reserve=N * 4)
        self.params = [pack(scale(k), 1.0, N, 0) for k in range(count)]
        self.barrier = moderngl.SHADER_STORAGE_BARRIER_BIT | moderngl.BUFFER_UPDATE_BARRIER_BIT

    def same_calls(self) -> None:
        ctx, shader, uniform, x, y, barrier = self.ctx, self.shader, self.uniform, self.x, self.y, self.barrier
        with ctx:
            for params in self.params:
                uniform.write(params)
                uniform.bind_to_uniform_block(0)
                x.bind_to_storage_buffer(0)
                y.bind_to_storage_buffer(1)
                shader.run(N // 64, 1, 1)
                ctx.memory_barrier(barrier)
            ctx.finish()

    def finished(self) -> None:
        ctx = self.ctx
        with ctx:
            self.uniform.write(self.params[0])
            self.uniform.bind_to_uniform_block(0)
            self.x.bind_to_storage_buffer(0)
            self.y.bind_to_storage_buffer(1)
            self.shader.run(N // 64, 1, 1)
            ctx.memory_barrier(self.barrier)
            ctx.finish()

    def check(self) -> None:
        with self.ctx:
            self.y.write(np.zeros(N, np.float32))
        self.same_calls()
        with self.ctx:
            got = np.frombuffer(self.y.read(), np.float32)
        np.testing.assert_array_equal(got, np.float32(scale(len(self.params) - 1)) * self.data + 1)

    def close(self) -> None:
        with self.ctx:
            for obj in (self.shader, self.uniform, self.x, self.y):
                obj.release()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--dispatches", type=int, default=100)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if not os.environ.get("XDG_RUNTIME_DIR"):
        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="ironaccel-xdg-")
    import moderngl

    from ironaccel.registry import registry

    device = registry.open("opengl", 0)
    try:
        ours = Ours(device, args.dispatches)
        direct = Direct(moderngl, device.ctx, args.dispatches)
        cases = [
            compare("batch_vs_plain", Case(repeat(ours.submit), check=ours.check),
                    Case(repeat(ours.plain)), rounds=args.pairs, target=1.0),
            compare("batch_vs_moderngl", Case(repeat(ours.submit), check=ours.check),
                    Case(repeat(direct.same_calls), check=direct.check),
                    rounds=args.pairs, target=1.1),
            compare("fence_vs_finish", Case(repeat(ours.fenced)), Case(repeat(direct.finished)),
                    rounds=args.pairs, target=1.1),
        ]
        ours.close()
        direct.close()
        facts = {"dispatches_per_op": args.dispatches, "elements": N,
                 "gl_renderer": device.descriptor.extras.get("gl_renderer", ""),
                 "gl_version": device.descriptor.extras.get("gl_version", "")}
        publish(report("opengl", device.descriptor.name, "moderngl", facts, cases), args.json)
    finally:
        device.close()


if __name__ == "__main__":
    main()
