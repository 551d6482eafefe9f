"""Vulkan -> CUDA zero-copy hand-over on one GPU, ordered by a semaphore, and back.

    python examples/vulkan_interop.py

Vulkan allocates exportable memory, writes it in a batch and signals a timeline semaphore; CUDA imports the
memory (an opaque fd, no copy) and the semaphore, waits for Vulkan's signal on the GPU, runs y = 2x + 1 over the
very bytes Vulkan wrote, writes the result back into them and signals; Vulkan waits for that on the GPU and reads
the memory back.  Both results are checked exactly against numpy; the exit status is 1 on a mismatch (or when no
Vulkan device is the same GPU as cuda:0), 0 otherwise.
"""

from __future__ import annotations

import sys

import numpy as np

from ironaccel.registry import registry

CUDA_C = r"""
extern "C" __global__ void scale_offset(const float* x, float* y, float a, float b, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""


def vulkan_twin(cuda):
    """The Vulkan device that is the same GPU as `cuda` (by UUID), or None."""
    want = cuda.uuid.removeprefix("GPU-").replace("-", "")
    for desc in registry.backend("vulkan").devices():
        if desc.extras.get("device_uuid") == want:
            return registry.open("vulkan", desc.ordinal)
    return None


def main() -> int:
    n = 1 << 20
    data = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    expected = np.float32(2) * data + np.float32(1)
    with registry.open("cuda", 0) as cuda:
        vk = vulkan_twin(cuda)
        if vk is None:
            print(f"no Vulkan device is the same GPU as cuda:0 ({cuda.uuid})", file=sys.stderr)
            return 1
        with vk:
            memory = vk.alloc(n, "float32", exportable=True)
            semaphore = vk.create_fence(exportable=True)
            batch = vk.batch()
            batch.write(memory, data)
            vk.submit(batch, signal=[(semaphore, 1)])  # Vulkan writes, then signals 1 on its queue

            with vk.export_memory(memory) as ext, vk.export_fence(semaphore) as ext_fence:
                shared = cuda.import_memory(ext, n, "float32")  # the same bytes, seen by CUDA
                fence = cuda.import_fence(ext_fence)
            print(f"handed over {shared.nbytes >> 20} MiB without a copy")
            y = cuda.alloc(n, "float32")
            kernel = cuda.pipeline(CUDA_C, "scale_offset", buffers=2, workgroup_size=256)
            cuda.queue.wait(fence, 1)  # on the GPU: CUDA's next work waits for Vulkan's write
            cuda.dispatch(kernel, [shared, y], n // 256, {"a": 2.0, "b": 1.0, "n": n})
            got = cuda.download(y)
            ok = np.array_equal(got, expected)
            print("CUDA read Vulkan's memory:", "exact" if ok else "MISMATCH")

            cuda.dispatch(kernel, [y, shared], n // 256, {"a": 1.0, "b": 0.0, "n": n})  # into Vulkan's memory
            cuda.queue.signal(fence, 2)
            out = np.zeros(n, np.float32)
            back = vk.batch()
            back.read(memory, out)
            vk.queue.wait(semaphore, 2)  # on the GPU: Vulkan's next work waits for CUDA's
            vk.submit(back).wait(timeout=60)
            back_ok = np.array_equal(out, expected)
            print("Vulkan read CUDA's result:", "exact" if back_ok else "MISMATCH")
            fence.close()
            shared.close()
            return 0 if ok and back_ok else 1


if __name__ == "__main__":
    sys.exit(main())
