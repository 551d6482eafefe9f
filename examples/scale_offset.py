"""One program, any backend: y = a * x + b on a ComputeDevice, written once.

    python examples/scale_offset.py              # every available backend that has a ComputeDevice
    python examples/scale_offset.py vulkan       # one backend (cuda, vulkan, webgpu, opengl)

Only the kernel's source differs per backend (CUDA C++, SPIR-V built from GLSL, WGSL, GLSL); the host code --
upload, alloc, pipeline, dispatch, download -- is the same `ironaccel.protocols.ComputeDevice` calls.
The kernel contract: two storage buffers (x read, y written), three params (a: f32, b: f32, n: u32),
workgroup size 64.
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import ironaccel

GLSL_VULKAN = """#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params { float a; float b; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""

GLSL_OPENGL = """#version 430
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(std140, binding = 0) uniform Params { float a; float b; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""

WGSL = """
struct Params { a: f32, b: f32, n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < p.n) { y[id.x] = p.a * x[id.x] + p.b; }
}
"""

CUDA = r"""
extern "C" __global__ void main_kernel(const float* x, float* y, float a, float b, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""


def spirv(glsl: str) -> bytes:
    """GLSL compiled to SPIR-V by glslangValidator (Debian/Ubuntu: glslang-tools)."""
    tool = shutil.which("glslangValidator")
    if tool is None:
        raise SystemExit("vulkan: needs glslangValidator to build the SPIR-V (apt-get install glslang-tools)")
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "k.comp", Path(tmp) / "k.spv"
        src.write_text(glsl)
        subprocess.run([tool, "-V", "--target-env", "vulkan1.0", str(src), "-o", str(out)], check=True,
                       capture_output=True)
        return out.read_bytes()


def kernel(backend: str) -> tuple[str | bytes, str]:
    """The scale_offset kernel in `backend`'s language, and its entry point."""
    if backend == "vulkan":
        return spirv(GLSL_VULKAN), "main"
    if backend == "opengl":
        return GLSL_OPENGL, "main"
    if backend == "webgpu":
        return WGSL, "main"
    if backend == "cuda":
        return CUDA, "main_kernel"
    raise SystemExit(f"no scale_offset kernel for {backend!r}")


def scale_offset(backend: str, x: np.ndarray, a: float, b: float) -> np.ndarray:
    """The generic routine: the same ComputeDevice calls on every backend."""
    code, entry = kernel(backend)
    device = ironaccel.open(backend, 0)
    try:
        pipeline = device.pipeline(code, entry, buffers=2, params=3)
        xs, ys = device.upload(x), device.alloc(x.size, "float32")
        device.dispatch(pipeline, [xs, ys], (x.size + 63) // 64, (np.float32(a), np.float32(b), np.uint32(x.size)))
        y = device.download(ys)
        xs.close()
        ys.close()
        return y
    finally:
        device.close()


def main(argv: list[str]) -> None:
    wanted = argv or [name for name in ("cuda", "vulkan", "webgpu", "opengl") if ironaccel.probe(name).available]
    if not wanted:
        print("no backend with a ComputeDevice is usable here; `python examples/survey.py` says why")
        return
    x = np.linspace(-1.0, 1.0, 1000, dtype=np.float32)
    for backend in wanted:
        y = scale_offset(backend, x, 2.0, 0.5)
        np.testing.assert_allclose(y, 2.0 * x + 0.5, rtol=1e-6, atol=1e-6)
        print(f"{backend}: y = 2x + 0.5 over {x.size} elements, checked")


if __name__ == "__main__":
    main(sys.argv[1:])
