"""WebGPU command batch: typed params by name, WGSL override constants, one batch submitted many times, and
per-dispatch timestamps where the adapter has them.

    python examples/webgpu_batch.py [--steps 8]

A batch of `steps` dispatches applies y = y * SCALE + t (SCALE an `override` fixed at pipeline creation,
t a param given by name per dispatch), then reads y back; it is recorded once and submitted three times with
different inputs.  Each result is checked against numpy; the exit status is nonzero on a mismatch.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import ironaccel

WGSL = """
override SCALE: f32 = 1.0;
struct Step { t: f32, n: u32 }
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<uniform> step: Step;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < step.n) {
        y[id.x] = y[id.x] * SCALE + step.t;
    }
}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    device = ironaccel.open("webgpu")
    try:
        scale = 0.5
        pipeline = device.pipeline(WGSL, buffers=1, constants={"SCALE": scale})
        print("params block:", pipeline.interface.params.describe())
        print("constants:", [(c.name, c.dtype.value if c.dtype else None) for c in pipeline.interface.constants])
        n = args.size
        y = device.alloc(n, "float32")
        start = np.zeros(n, np.float32)
        out = np.zeros(n, np.float32)
        timed = "timestamps" in device.features
        batch = device.batch(timestamps=timed)
        load = batch.write(y, start)
        for k in range(args.steps):
            batch.dispatch(pipeline, [y], (n + 63) // 64, {"t": float(k), "n": n})
        batch.read(y, out)
        failures = 0
        rng = np.random.default_rng(0)
        for run in range(3):
            data = rng.standard_normal(n).astype(np.float32)
            load.update(array=data)
            submission = device.submit(batch)
            submission.wait(timeout=60)
            expected = data.copy()
            for k in range(args.steps):
                expected = expected * np.float32(scale) + np.float32(k)
            ok = np.allclose(out, expected, rtol=1e-5, atol=1e-5)
            failures += not ok
            line = f"submit {run}: {'ok' if ok else 'MISMATCH'}"
            if timed:
                timings = submission.timings()
                line += (f", {len(timings.spans)} commands, device time {timings.total_ns / 1e3:.1f} us, "
                         f"dispatches {[round(ns / 1e3, 1) for ns in timings.commands_ns[1:-1]]} us")
            print(line)
        if not timed:
            print("this adapter has no 'timestamp-query': the batch ran untimed")
        batch.close()
    finally:
        device.close()
    if failures:
        print(f"{failures} submits gave wrong results", file=sys.stderr)
        return 1
    print("all submits match numpy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
