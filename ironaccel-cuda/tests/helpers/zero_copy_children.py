"""What interop/test_zero_copy.py runs in a child process of its own: CUDA with Vulkan or OpenGL on one GPU.

A fresh process, because NVIDIA's Vulkan and GL drivers fail to load ("cannot allocate memory in static TLS
block") into a process that has loaded PyTorch and the rest, as the CUDA suite's process has by then.

    python -m helpers.zero_copy_children CASE   # from tests/; exit 0: passed; 3: the other API is absent (the
                                                # reason on stdout)
"""

from __future__ import annotations

import sys

import numpy as np

from helpers.kernels import SOURCE

N = 1 << 20
ABSENT = 3


class Absent(Exception):
    """No device of the other API is this GPU (or it lacks the feature)."""


def twin(dev, backend: str, feature: str):
    """A device of `backend` on the same GPU as `dev` that has `feature`."""
    from ironaccel.registry import registry

    probe = registry.probe(backend)
    if not probe.available:
        raise Absent(f"{backend} unavailable: {probe.reason}")
    found = registry.backend(backend)
    want = dev.uuid.removeprefix("GPU-").replace("-", "")
    for desc in found.devices():
        if "device_uuid" in desc.extras:
            same = desc.extras["device_uuid"] == want
        else:
            same = desc.vendor.value == "nvidia"
        if same:
            other = found.open(desc.ordinal)
            if feature not in other.features:
                other.close()
                raise Absent(f"{backend}:{desc.ordinal} lacks {feature}")
            return other
    raise Absent(f"no {backend} device is the same GPU as cuda:{dev.ordinal} ({dev.uuid})")


def _scale(dev):
    return dev.pipeline(SOURCE, "scale_offset", buffers=2, params=3, workgroup_size=256)


def vulkan_to_cuda_and_back(dev) -> None:
    """Vulkan memory and timeline semaphore into CUDA; CUDA computes over it and signals; Vulkan reads it back."""
    vk = twin(dev, "vulkan", "export_fence")
    try:
        data = np.random.default_rng(7).standard_normal(N).astype(np.float32)
        src = vk.alloc(N, "float32", exportable=True)
        fence = vk.create_fence(exportable=True)
        fill = vk.batch()
        fill.write(src, data)
        vk.submit(fill, signal=[(fence, 1)])  # Vulkan writes, then signals 1
        with vk.export_memory(src) as ext:
            seen = dev.import_memory(ext, N, "float32")
        with vk.export_fence(fence) as ext_fence:
            mirror = dev.import_fence(ext_fence)
        y = dev.alloc(N, "float32")
        dev.queue.wait(mirror, 1)  # on the GPU: CUDA's next work waits for Vulkan's write
        pipeline = _scale(dev)
        groups = N // 256
        dev.dispatch(pipeline, [seen, y], groups, (2.0, 1.0, N))
        expected = np.float32(2) * data + np.float32(1)
        np.testing.assert_array_equal(dev.download(y), expected)  # exact: the same bytes, no copy in between
        dev.dispatch(pipeline, [y, seen], groups, (1.0, 0.0, N))  # CUDA writes Vulkan's memory ...
        dev.queue.signal(mirror, 2)  # ... then signals 2 on the GPU
        out = np.zeros(N, np.float32)
        back = vk.batch()
        back.read(src, out)
        vk.queue.wait(fence, 2)  # Vulkan's next work waits for CUDA's
        vk.submit(back).wait(timeout=60)
        np.testing.assert_array_equal(out, expected)
        fence.wait(2, timeout=60)
        mirror.wait(2, timeout=60)
        assert mirror.value >= 2
        mirror.close()
        seen.close()
    finally:
        vk.close()


def cuda_to_vulkan(dev) -> None:
    """CUDA's exportable memory into Vulkan: Vulkan reads CUDA's bytes and CUDA sees Vulkan's write."""
    vk = twin(dev, "vulkan", "import_memory")
    try:
        data = np.arange(N, dtype=np.float32)
        src = dev.alloc(N, "float32", exportable=True)
        assert src.exportable and src.memory == "device"
        dev.write(src, data)
        dev.synchronize()
        with dev.export_memory(src) as ext:
            assert ext.size >= N * 4 and ext.backend == "cuda"
            seen = vk.import_memory(ext, N, "float32")
        np.testing.assert_array_equal(vk.download(seen), data)
        vk.write(seen, data * 3)
        vk.synchronize()
        np.testing.assert_array_equal(dev.download(src), data * 3)
        seen.close()
        src.close()
    finally:
        vk.close()


def opengl_and_cuda(dev) -> None:
    """CUDA's exportable memory into OpenGL (GL_EXT_memory_object_fd): GL reads it and writes what CUDA reads."""
    gl = twin(dev, "opengl", "import_memory")
    try:
        data = np.arange(N, dtype=np.float32) - N // 2
        src = dev.alloc(N, "float32", exportable=True)
        dev.write(src, data)
        dev.synchronize()
        with dev.export_memory(src) as ext:
            seen = gl.import_memory(ext, N, "float32")
        np.testing.assert_array_equal(gl.download(seen), data)
        gl.write(seen, data * 5)  # OpenGL's data, read by CUDA without a copy
        gl.synchronize()
        np.testing.assert_array_equal(dev.download(src), data * 5)
        seen.close()
    finally:
        gl.close()


CASES = {f.__name__: f for f in (vulkan_to_cuda_and_back, cuda_to_vulkan, opengl_and_cuda)}


def main(case: str) -> int:
    import ironaccel_cuda as cu

    dev = cu.Device(0)
    try:
        CASES[case](dev)
    except Absent as exc:
        print(exc)
        return ABSENT
    finally:
        dev.close()
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
