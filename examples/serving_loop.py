"""A serving loop written once against the compute kit's execution model, run on any ComputeDevice backend.

    python examples/serving_loop.py vulkan     # or webgpu, opengl, cuda

Each step is one feature of the execution model, and each step checks its result against numpy (the exit
status is nonzero on a mismatch):

1. typed params by name and the public reflection (`pipeline.interface`);
2. a command batch recorded once (upload, dispatch, read back) and submitted per request, its input and a
   param re-bound between submits, with per-dispatch GPU timestamps where the device has them;
3. two queues ordered by a fence (a producer queue signals, a consumer queue waits on the GPU, the host waits
   with a timeout) -- the default queue twice where the device has only one;
4. host-visible memory mapped, and handed to numpy through DLPack without a copy, where the device has them.

Only the kernel's source differs per backend; everything below `kernel()` is the same calls.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import ironaccel

GLSL_VULKAN = """#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Y { float y[]; };
layout(push_constant) uniform Params { float a; float b; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) y[i] = a * y[i] + b;
}
"""

GLSL_OPENGL = """#version 430
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Y { float y[]; };
layout(std140, binding = 0) uniform Params { float a; float b; uint n; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) y[i] = a * y[i] + b;
}
"""

WGSL = """
struct Params { a: f32, b: f32, n: u32 }
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@group(0) @binding(1) var<uniform> p: Params;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < p.n) { y[id.x] = p.a * y[id.x] + p.b; }
}
"""

CUDA = r"""
extern "C" __global__ void main_kernel(float* y, float a, float b, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * y[i] + b;
}
"""


def kernel(backend: str) -> tuple[str | bytes, str]:
    """The y = a * y + b kernel in `backend`'s language, and its entry point."""
    if backend == "vulkan":
        tool = shutil.which("glslangValidator")
        if tool is None:
            raise SystemExit("vulkan: needs glslangValidator to build the SPIR-V (apt-get install glslang-tools)")
        with tempfile.TemporaryDirectory() as tmp:
            src, out = Path(tmp) / "k.comp", Path(tmp) / "k.spv"
            src.write_text(GLSL_VULKAN)
            subprocess.run([tool, "-V", str(src), "-o", str(out)], check=True, capture_output=True)
            return out.read_bytes(), "main"
    sources = {"opengl": (GLSL_OPENGL, "main"), "webgpu": (WGSL, "main"), "cuda": (CUDA, "main_kernel")}
    if backend not in sources:
        raise SystemExit(f"no kernel for {backend!r}; give one of vulkan, webgpu, opengl, cuda")
    return sources[backend]


def check(what: str, got: np.ndarray, want: np.ndarray) -> bool:
    ok = bool(np.allclose(got, want, rtol=1e-5, atol=1e-5))
    print(f"  {what}: {'ok' if ok else 'MISMATCH'}")
    return ok


def serve(backend: str, n: int = 4096) -> bool:
    device = ironaccel.open(backend, 0)
    ok = True
    try:
        code, entry = kernel(backend)
        pipeline = device.pipeline(code, entry, buffers=1, params=3)
        groups = (n + 63) // 64
        print(f"{backend}: {device.descriptor.name}; features {sorted(device.features)}")

        print("1. typed params by name; the reflected parameter block")
        print("  params:", pipeline.interface.params.describe())
        y = device.upload(np.ones(n, np.float32))
        device.dispatch(pipeline, [y], groups, {"a": 2.0, "b": 1.0, "n": n})
        ok &= check("y = 2 * 1 + 1", device.download(y), np.full(n, 3, np.float32))

        print("2. one batch recorded, submitted per request with its input and a param re-bound")
        timed = "timestamps" in device.features
        batch = device.batch(timestamps=timed)
        out = np.zeros(n, np.float32)
        load = batch.write(y, np.zeros(n, np.float32))
        step = batch.dispatch(pipeline, [y], groups, {"a": 1.0, "b": 0.0, "n": n})
        batch.dispatch(pipeline, [y], groups, {"a": 1.0, "b": 1.0, "n": n})
        batch.read(y, out)
        rng = np.random.default_rng(0)
        for request, scale in enumerate((0.5, 2.0, -1.0)):
            data = rng.standard_normal(n).astype(np.float32)
            load.update(array=data)
            step.update(params={"a": scale, "b": 0.0, "n": n})
            submission = device.submit(batch)
            submission.wait(timeout=60)
            ok &= check(f"request {request} (a = {scale})", out, data * np.float32(scale) + 1)
            if timed:
                spans = submission.timings()
                print(f"    GPU time {spans.total_ns / 1e3:.1f} us, per command "
                      f"{[round(ns / 1e3, 1) for ns in spans.commands_ns]} us")
        batch.close()

        print(f"3. two queues ordered by a fence ({device.max_queues} queue(s) on this device)")
        producer = device.queue
        consumer = device.create_queue() if device.max_queues > 1 else device.queue
        fence = device.create_fence(0)
        device.write(y, np.ones(n, np.float32))
        producer.dispatch(pipeline, [y], groups, {"a": 3.0, "b": 0.0, "n": n})
        producer.signal(fence, 1)
        consumer.wait(fence, 1)
        consumer.dispatch(pipeline, [y], groups, {"a": 1.0, "b": 2.0, "n": n})
        consumer.signal(fence, 2)
        fence.wait(2, timeout=60)
        ok &= check("produced 3, consumed + 2", device.download(y), np.full(n, 5, np.float32))
        if consumer is not producer:
            consumer.close()
        fence.close()

        print("4. host-visible memory: map, and DLPack to numpy without a copy")
        kind = "host" if "host" in device.memory_kinds else device.memory_kinds[0]
        host = device.alloc(n, "float32", memory=kind)
        if host.host_visible:
            with host.map() as view:
                view[:] = np.arange(n, dtype=np.float32)
            device.dispatch(pipeline, [host], groups, {"a": 2.0, "b": 0.0, "n": n})
            device.synchronize()
            with host.map(write=False) as view:
                ok &= check(f"{kind} memory mapped after a dispatch", view, 2 * np.arange(n, dtype=np.float32))
            if "dlpack" in device.features:
                shared = np.from_dlpack(host)
                ok &= check("numpy's view of the same memory", shared, 2 * np.arange(n, dtype=np.float32))
                del shared
            else:
                print("  no DLPack export on this backend: device.download(buffer) copies")
        else:
            print(f"  no host-visible memory here (memory kinds {device.memory_kinds}): device.download copies")
        host.close()
        y.close()
    finally:
        device.close()
    return ok


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    return 0 if serve(argv[0]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
