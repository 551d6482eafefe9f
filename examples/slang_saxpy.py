"""One Slang kernel, every backend: y = a * x + y with a typed param struct, and a link-time constant.

    python examples/slang_saxpy.py              # every available backend that has a ComputeDevice
    python examples/slang_saxpy.py vulkan       # one backend (vulkan, webgpu, opengl, cuda)

The source is plain Slang, the same text on every backend: ironaccel-slang compiles it per device with slangc
(SPIR-V, WGSL, GLSL, CUDA C++) and binds the buffers and the params block by the names slangc's reflection gives
(`pipeline.interface`).  Needs `pip install ironaccel-slang` and a slangc (`pip install --no-deps slangtorch`).
"""

import sys

import numpy as np

import ironaccel
from ironaccel_slang import Slang

SAXPY = Slang("""
struct Params { float a; uint n; };

[shader("compute")]
[numthreads(64, 1, 1)]
void saxpy(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform StructuredBuffer<float> x,
           uniform Params p)
{
    uint i = tid.x;
    if (i < p.n)
        y[i] = p.a * x[i] + y[i];
}
""")

SCALE = Slang("""
extern static const uint FACTOR = 2;   // a Slang link-time constant: constants={"FACTOR": ...} per pipeline

[shader("compute")]
[numthreads(64, 1, 1)]
void scale(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<uint> y, uniform uint n)
{
    if (tid.x < n)
        y[tid.x] = y[tid.x] * FACTOR;
}
""")


def run(backend: str, n: int = 1000) -> None:
    device = ironaccel.open(backend, 0)
    try:
        x = np.arange(n, dtype=np.float32)
        y = np.full(n, 1.0, np.float32)
        pipeline = device.pipeline(SAXPY, "saxpy", buffers=2)
        print(f"{backend}: saxpy binds {[b.name for b in pipeline.interface.bindings]}, params block:\n"
              f"{pipeline.interface.params.describe()}")
        ys, xs = device.upload(y), device.upload(x)
        device.dispatch(pipeline, [ys, xs], (n + 63) // 64, {"p": {"a": 2.0, "n": n}})
        np.testing.assert_array_equal(device.download(ys), 2.0 * x + y)
        print(f"{backend}: y = 2x + y over {n} elements, exact")

        u = np.arange(n, dtype=np.uint32)
        for factor in (None, 5):
            constants = None if factor is None else {"FACTOR": factor}
            scaled = device.pipeline(SCALE, "scale", buffers=1, constants=constants)
            us = device.upload(u)
            device.dispatch(scaled, [us], (n + 63) // 64, (n,))
            np.testing.assert_array_equal(device.download(us), u * (factor or 2))
            us.close()
            print(f"{backend}: FACTOR = {factor or '2 (the default)'}, exact")
        ys.close()
        xs.close()
    finally:
        device.close()


def main(argv: list[str]) -> None:
    wanted = argv or [name for name in ("vulkan", "webgpu", "opengl", "cuda") if ironaccel.probe(name).available]
    if not wanted:
        print("no backend with a ComputeDevice is usable here; `python examples/survey.py` says why")
        return
    for backend in wanted:
        run(backend)


if __name__ == "__main__":
    main(sys.argv[1:])
