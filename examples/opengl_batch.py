"""OpenGL execution model in one program: typed params by name, a constant, a batch recorded once and
submitted twice, and per-command GPU timestamps.

    python examples/opengl_batch.py

y = x * SCALE + a * pair.x - pair.y (SCALE a constant: a #define put after #version; a, pair, n typed params of a
std140 block, passed by name).  The batch writes x, runs the shader twice (y, then y again from y), reads y back;
it is submitted, one command's params are changed, and it is submitted again.  Each result is checked against
numpy; the exit status is 1 on a mismatch, 0 otherwise.
"""

from __future__ import annotations

import sys

import numpy as np

from ironaccel.registry import registry

GLSL = """#version 430
#ifndef SCALE
#define SCALE 1.0
#endif
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
layout(std140, binding = 0) uniform Params { float a; vec2 pair; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) { y[i] = x[i] * SCALE + a * pair.x - pair.y; }
}
"""


def expected(x: np.ndarray, scale: float, a: float, pair: tuple[float, float]) -> np.ndarray:
    return x * np.float32(scale) + np.float32(a) * np.float32(pair[0]) - np.float32(pair[1])


def main() -> int:
    n = 4096
    scale = 3.0
    rng = np.random.default_rng(7)
    data = rng.standard_normal(n).astype(np.float32)
    with registry.open("opengl", 0) as device:
        pipeline = device.pipeline(GLSL, buffers=2, constants={"SCALE": scale})
        print("params block:", [(f.name, f.offset, str(f.type)) for f in pipeline.interface.params.fields])
        x, y = device.alloc(n, "float32"), device.alloc(n, "float32")
        out = np.zeros(n, np.float32)
        timed = "timestamps" in device.features
        batch = device.batch(timestamps=timed)
        batch.write(x, data)
        groups = (n + 63) // 64
        first = batch.dispatch(pipeline, [x, y], groups, {"a": 2.0, "pair": (0.5, 1.0), "n": n})
        batch.dispatch(pipeline, [y, x], groups, {"a": 0.0, "pair": (0.0, 0.0), "n": n})  # x = y * SCALE
        batch.read(x, out)
        ok = True
        for round_, params in enumerate([(2.0, (0.5, 1.0)), (-1.0, (4.0, 0.25))]):
            if round_:
                first.update(params={"a": params[0], "pair": params[1], "n": n})
            sub = device.submit(batch)
            sub.wait(timeout=60)
            want = expected(expected(data, scale, *params), scale, 0.0, (0.0, 0.0))
            match = np.allclose(out, want, rtol=1e-5, atol=1e-5)
            ok &= bool(match)
            line = f"submit {round_ + 1}: a={params[0]} pair={params[1]} -> {'ok' if match else 'MISMATCH'}"
            if timed:
                timings = sub.timings()
                line += f"; commands {[round(t / 1e3, 1) for t in timings.commands_ns]} us, total " \
                        f"{timings.total_ns / 1e3:.1f} us"
            print(line)
        batch.close()
    print("ok" if ok else "mismatch")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
