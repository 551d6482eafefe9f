"""Zero-copy between the CUDA ComputeDevice and other APIs on one GPU, and the typed refusals of bad handles.

Vulkan <-> CUDA runs where a Vulkan device is the same GPU as cuda:0 (by UUID): memory exported by one side is
imported by the other, a Vulkan timeline semaphore is imported into CUDA, and each side waits for the other on
the GPU.  OpenGL reads and writes CUDA memory where its driver has GL_EXT_memory_object_fd (NVIDIA's EGL).  Both
run in a process of their own (helpers/zero_copy_children.py says why).
The in-memory double's exports (memfds) stand in for another API against the fake driver; a real driver refuses
them with a typed error, which is checked there instead.  Under IRONACCEL_REQUIRE naming vulkan or opengl, a
missing twin device is a failure, not a skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import FAKE, zero_copy_children
from helpers.kernels import SOURCE

from ironaccel.compute.execution import ExternalFence, ExternalMemory
from ironaccel.errors import ClosedError, InvalidArgument, IronAccelError, Unsupported
from ironaccel.testing.pytest_plugin import required_backends

pytestmark = pytest.mark.backend("cuda")

TESTS = Path(__file__).parents[1]  # the children run as helpers.zero_copy_children from here


def _absent(backend: str, why: str) -> None:
    if backend in required_backends() or "*" in required_backends():
        pytest.fail(f"{why} (required by IRONACCEL_REQUIRE)", pytrace=False)
    pytest.skip(why)


def _child(case: str, backend: str) -> None:
    """Run zero_copy_children.py's `case` in a process of its own; its other API absent: skip (fail if required)."""
    if FAKE:  # the fake driver's memory is memfds, which lavapipe and llvmpipe refuse as not their own
        _absent(backend, f"the fake driver shares no GPU with {backend}")
    done = subprocess.run([sys.executable, "-m", "helpers.zero_copy_children", case], capture_output=True,
                          text=True, timeout=300, cwd=TESTS)
    if done.returncode == zero_copy_children.ABSENT:
        _absent(backend, done.stdout.strip())
    assert done.returncode == 0, f"{case} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _scale(dev):
    return dev.pipeline(SOURCE, "scale_offset", buffers=2, params=3, workgroup_size=256)


def test_vulkan_memory_and_semaphore_to_cuda_and_back():
    _child("vulkan_to_cuda_and_back", "vulkan")


def test_cuda_memory_to_vulkan():
    _child("cuda_to_vulkan", "vulkan")


def test_opengl_reads_and_writes_cuda_memory():
    _child("opengl_and_cuda", "opengl")


def _double():
    from ironaccel.testing.double import MemoryBackend

    return MemoryBackend().open(0)


def test_memfd_exports_of_another_api(dev):
    """The in-memory double's exports are memfds: the fake driver imports them (shared pages, both ways); a real
    driver refuses an fd that is not its own with a typed error, leaving no fd behind."""
    other = _double()
    try:
        n = 4096
        data = np.arange(n, dtype=np.float32)
        src = other.alloc(n, "float32", exportable=True)
        other.write(src, data)
        fence = other.create_fence(exportable=True)
        before = _open_fds()
        with other.export_memory(src) as ext, other.export_fence(fence) as ext_fence:
            if not FAKE:
                with pytest.raises(IronAccelError):
                    dev.import_memory(ext, n, "float32")
                with pytest.raises(IronAccelError):
                    dev.import_fence(ext_fence)
            else:
                seen = dev.import_memory(ext, n, "float32")
                mirror = dev.import_fence(ext_fence)
        if FAKE:
            np.testing.assert_array_equal(dev.download(seen), data)
            dev.write(seen, data + 1)
            np.testing.assert_array_equal(other.download(src), data + 1)
            other.queue.signal(fence, 4)
            dev.queue.wait(mirror, 4)
            mirror.wait(4, timeout=30)
            dev.queue.signal(mirror, 9)
            fence.wait(9, timeout=30)
            assert mirror.value >= 9
            mirror.close()
            seen.close()
        assert _open_fds() == before
        np.testing.assert_array_equal(dev.download(dev.upload(data)), data)  # usable afterwards
    finally:
        other.close()


def test_bad_external_handles(dev):
    """Closed, too-small and wrong-kind fds: a typed error naming the operation, no fd leaked, device usable."""
    import gc

    gc.collect()
    before = _open_fds()
    read, write = os.pipe()
    small = os.memfd_create("too-small")
    os.ftruncate(small, 4096)
    made: list = []

    def ext(kind, fd, size, **extra):  # each handle owns a duplicate, closed at the end
        made.append(kind(os.dup(fd), *((size,) if kind is ExternalMemory else ()), backend="vulkan", **extra))
        return made[-1]

    try:
        for fd, size in ((read, 1 << 20), (small, 1 << 20)):
            with pytest.raises(InvalidArgument) as info:
                dev.import_memory(ext(ExternalMemory, fd, size), size // 4)
            assert "import_memory" in str(info.value)
        with pytest.raises(InvalidArgument):
            dev.import_fence(ext(ExternalFence, read, 0))
        closed_ext = ext(ExternalMemory, small, 4096)
        closed_ext.close()
        with pytest.raises((ClosedError, InvalidArgument)):
            dev.import_memory(closed_ext, 16)
        with pytest.raises(InvalidArgument):
            dev.import_memory(ext(ExternalMemory, small, 4096, handle_type="win32"), 16)
        with pytest.raises(InvalidArgument):
            dev.export_memory(dev.alloc(16, "float32"))  # not exportable
        with pytest.raises(IronAccelError):
            dev.create_fence(exportable=True)  # CUDA exports no semaphores: Vulkan's are imported
    finally:
        for handle in made:
            handle.close()
        for fd in (read, write, small):
            os.close(fd)
    gc.collect()
    assert _open_fds() == before
    np.testing.assert_array_equal(dev.download(dev.upload(np.ones(8, np.float32))), np.ones(8, np.float32))


def test_dlpack_of_device_and_host_memory(dev):
    data = np.arange(256, dtype=np.float32)
    buf = dev.upload(data)
    assert buf.__dlpack_device__() == (2, dev.ordinal)  # kDLCUDA: a CUDA consumer (cupy, torch) takes it
    with pytest.raises((RuntimeError, BufferError, TypeError)):
        np.from_dlpack(buf)  # numpy's own refusal of device memory
    same = dev.from_dlpack(buf)  # this device's memory: taken without a copy
    assert same.ptr == buf.ptr and same.dtype == buf.dtype and same.size == buf.size
    dev.write(same, data * 2)
    np.testing.assert_array_equal(dev.download(buf), data * 2)
    host = dev.alloc(256, "float32", memory="host")
    assert host.host_visible and host.__dlpack_device__() == (1, 0)
    view = np.from_dlpack(host)
    view[:] = data
    pipeline = _scale(dev)
    dev.dispatch(pipeline, [host, buf], 1, (3.0, 0.0, 256))  # a kernel reads host memory through its device address
    np.testing.assert_array_equal(dev.download(buf), data * 3)
    with pytest.raises((InvalidArgument, Unsupported)):
        dev.alloc(16, "float32", memory="host", exportable=True)
    import ironaccel_cuda as cu

    if cu.device_count() > 1:  # the fake driver has two; an H200 machine of one GPU checks the rest
        other = cu.Device(1)
        try:
            with pytest.raises(InvalidArgument):
                dev.from_dlpack(other.upload(data))
        finally:
            other.close()
