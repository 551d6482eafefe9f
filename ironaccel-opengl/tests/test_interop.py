"""Vulkan -> OpenGL without a copy: a buffer Vulkan exports (opaque fd) imported through GL_EXT_memory_object_fd.

Not marked for a backend: it needs two (a GL driver with the extension and a Vulkan device that exports
memory), and where either is missing it skips saying which, a skip IRONACCEL_REQUIRE does not turn into a
failure on CI (llvmpipe has the extension; lavapipe exports, but the two Mesa drivers do not share memory
objects, so there the test checks the typed refusal).
On the H200 (NVIDIA's EGL and Vulkan) it runs: check `-rs` shows no skip of it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ironaccel.errors import InvalidArgument
from ironaccel.registry import registry

SCALE_OFFSET = (Path(__file__).with_name("kernels") / "scale_offset.comp").read_text()


@pytest.fixture
def device():
    """The opengl device, or a skip saying why there is none (this module is not marked for the backend)."""
    try:
        dev = registry.open("opengl", 0)
    except Exception as exc:
        pytest.skip(f"no OpenGL device: {exc}")
    try:
        yield dev
    finally:
        dev.close()


def test_import_a_vulkan_exported_buffer(device) -> None:
    """Vulkan -> GL without a copy: Vulkan writes, GL reads and writes, Vulkan reads (where both can)."""
    if "import_memory" not in device.features:
        pytest.skip("this GL driver lacks GL_EXT_memory_object_fd")
    try:
        vk = registry.open("vulkan", 0)
    except Exception as exc:
        pytest.skip(f"no Vulkan device: {exc}")
    try:
        if "export_memory" not in vk.features:
            pytest.skip("this Vulkan device does not export memory")
        n = 1 << 16
        data = np.arange(n, dtype=np.float32)
        source = vk.alloc(n, "float32", exportable=True)
        vk.write(source, data)
        vk.synchronize()
        if "llvmpipe" in vk.descriptor.name:
            # Mesa's lavapipe (Vulkan) and llvmpipe (GL) are two drivers whose memory objects do not
            # interoperate: the import must be a typed refusal that leaves the GL device usable.
            with vk.export_memory(source) as ext, pytest.raises(InvalidArgument, match="import_memory"):
                device.import_memory(ext, n, "float32")
            np.testing.assert_array_equal(device.download(device.upload(data)), data)
            return
        with vk.export_memory(source) as ext:
            seen = device.import_memory(ext, n, "float32")
        np.testing.assert_array_equal(device.download(seen), data)
        pipe = device.pipeline(SCALE_OFFSET, buffers=2, params=3)
        x = device.upload(data)
        device.dispatch(pipe, [x, seen], (n + 63) // 64, (np.float32(2), np.float32(1), np.uint32(n)))
        device.synchronize()
        np.testing.assert_array_equal(vk.download(source), data * 2 + 1)
        seen.close()
        source.close()
    finally:
        vk.close()
