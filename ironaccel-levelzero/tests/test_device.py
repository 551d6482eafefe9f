"""The Level Zero ComputeDevice through the real loader and the fake driver (conftest): saxpy against numpy,
a kernel found by name in the real SPIR-V module, and the bad input the issue lists -- each a typed error
naming the call, the device usable after."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ironaccel.errors import ClosedError, CompileError, DriverError, InvalidArgument, IronAccelError
from ironaccel.testing.pytest_plugin import require

BACKEND = "levelzero"


@pytest.fixture
def device(kernels_spv: bytes):
    dev = require(BACKEND).open(0)
    try:
        yield dev
    finally:
        dev.close()


def _saxpy(device, spv: bytes, a: float, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    pipeline = device.pipeline(spv, "saxpy", buffers=2, params=2, workgroup_size=(32, 1, 1))
    xs, ys = device.upload(x), device.upload(y)
    try:
        groups = (x.size + 31) // 32
        device.dispatch(pipeline, [xs, ys], groups, (np.float32(a), np.uint32(x.size))).wait()
        return device.download(ys)
    finally:
        xs.close()
        ys.close()
        pipeline.close()


def test_saxpy_gives_numpys_answer(device, kernels_spv: bytes) -> None:
    rng = np.random.default_rng(7)
    n = 10_000  # not a multiple of the workgroup size: the kernel's bound check matters
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    got = _saxpy(device, kernels_spv, 2.5, x, y)
    np.testing.assert_array_equal(got, np.float32(2.5) * x + y)


def test_second_device_runs_its_own_work(kernels_spv: bytes) -> None:
    backend = require(BACKEND)
    assert len(backend.devices()) == 2
    with backend.open(1) as dev:
        assert dev.descriptor.ordinal == 1 and dev.descriptor.name.endswith("GPU 1")
        x = np.arange(100, dtype=np.float32)
        np.testing.assert_array_equal(_saxpy(dev, kernels_spv, -1.0, x, x), np.zeros(100, np.float32))


def test_batch_timestamps_are_ordered_nanoseconds(device, kernels_spv: bytes) -> None:
    n = 4096
    pipeline = device.pipeline(kernels_spv, "scale_offset", buffers=2, params=3, workgroup_size=(64, 1, 1))
    x, y = device.upload(np.ones(n, np.float32)), device.alloc(n, "float32")
    batch = device.batch(timestamps=True)
    for _ in range(3):
        batch.dispatch(pipeline, [x, y], n // 64, (np.float32(2), np.float32(1), np.uint32(n)))
    spans = device.submit(batch).timings().spans  # from kernel-timestamp events, in ns from the batch's start
    assert len(spans) == 3 and spans[0][0] == 0
    assert all(s <= e for s, e in spans)
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(2)), spans  # the barriers keep them in order
    np.testing.assert_array_equal(device.download(y), np.full(n, 3, np.float32))
    batch.close()


def test_wrong_kernel_arguments(device, kernels_spv: bytes) -> None:
    with pytest.raises(InvalidArgument, match="takes 5 arguments, not 2 buffers \\+ 2 params") as info:
        device.pipeline(kernels_spv, "scale_offset", buffers=2, params=2)
    assert info.value.op == "pipeline"
    with pytest.raises(InvalidArgument, match="ZE_RESULT_ERROR_INVALID_KERNEL_NAME") as named:
        device.pipeline(kernels_spv, "no_such_kernel", buffers=2, params=3)
    assert named.value.op == "zeKernelCreate('no_such_kernel')"
    with pytest.raises(InvalidArgument, match="ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION") as group:
        device.pipeline(kernels_spv, "scale_offset", buffers=2, params=3, workgroup_size=(2048, 1, 1))
    assert group.value.op == "zeKernelSetGroupSize"
    np.testing.assert_array_equal(_saxpy(device, kernels_spv, 1.0, np.ones(8, np.float32), np.ones(8, np.float32)),
                                  np.full(8, 2, np.float32))  # usable after


def test_failing_module_loads(device, kernels_spv: bytes) -> None:
    for bad, why in [(kernels_spv[:-4] + (3 << 16 | 56).to_bytes(4, "little"), "runs past the end"),
                     (kernels_spv.replace((2 << 16 | 17).to_bytes(4, "little") + (6).to_bytes(4, "little"),
                                          (2 << 16 | 17).to_bytes(4, "little") + (4).to_bytes(4, "little"), 1),
                      "does not declare OpCapability Kernel")]:
        with pytest.raises(CompileError, match=why) as info:
            device.pipeline(bad, "scale_offset", buffers=2, params=3)
        assert info.value.op == "zeModuleCreate" and info.value.code_name == "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE"
    for not_spirv in ("scale_offset", b"\x00" * 20, b"\x03\x02\x23\x07" * 3, np.zeros(8, np.float32), 7):
        with pytest.raises(InvalidArgument):
            device.pipeline(not_spirv, "scale_offset", buffers=2, params=3)


@pytest.mark.skipif(shutil.which("glslangValidator") is None, reason="needs glslangValidator (glslang-tools)")
def test_shader_spirv_is_not_a_kernel(device, tmp_path: Path) -> None:
    """Vulkan SPIR-V (a GLCompute shader) is valid SPIR-V that Level Zero cannot run: a build failure, logged."""
    src = tmp_path / "s.comp"
    src.write_text("#version 450\nlayout(local_size_x = 64) in;\nvoid main() {}\n")
    subprocess.run(["glslangValidator", "-V", str(src), "-o", str(tmp_path / "s.spv")], check=True,
                   capture_output=True)
    with pytest.raises(CompileError, match="not an OpenCL Kernel"):
        device.pipeline((tmp_path / "s.spv").read_bytes(), "main", buffers=2, params=3)


def test_bad_sizes_and_closed_objects(device, kernels_spv: bytes) -> None:
    too_big = device.max_buffer_bytes // 4 + 1
    with pytest.raises(InvalidArgument):
        device.alloc(too_big, "float32")
    pipeline = device.pipeline(kernels_spv, "scale_offset", buffers=2, params=3, workgroup_size=(64, 1, 1))
    x, y = device.upload(np.ones(64, np.float32)), device.alloc(64, "float32")
    fence = device.create_fence()
    queue = device.create_queue()
    queue.close()
    with pytest.raises(ClosedError):
        queue.dispatch(pipeline, [x, y], 1, (np.float32(1), np.float32(0), np.uint32(64)))
    fence.close()
    with pytest.raises(ClosedError):
        device.queue.signal(fence, 1)
    y.close()
    with pytest.raises(ClosedError):
        device.dispatch(pipeline, [x, y], 1, (np.float32(1), np.float32(0), np.uint32(64)))
    x.close()
    with pytest.raises(IronAccelError):
        device.dispatch(pipeline, [x, y], 1, (np.float32(1), np.float32(0), np.uint32(64)))


def test_kernel_the_fake_cannot_compute_is_a_typed_error(device, kernels_spv: bytes) -> None:
    """A module whose kernel the fake does not know: the launch fails with a DriverError naming the call."""
    renamed = kernels_spv.replace(b"saxpy\x00\x00\x00", b"saxpz\x00\x00\x00")
    pipeline = device.pipeline(renamed, "saxpz", buffers=2, params=2)
    x, y = device.upload(np.ones(4, np.float32)), device.alloc(4, "float32")
    with pytest.raises(DriverError, match="ZE_RESULT_ERROR_UNSUPPORTED_FEATURE") as info:
        device.dispatch(pipeline, [x, y], 1, (np.float32(1), np.uint32(4)))
    assert info.value.op == "zeCommandListAppendLaunchKernel"
    pipeline.close()
    x.close()
    y.close()


def test_a_long_lived_fence_reuses_its_events(device, kernels_spv: bytes) -> None:
    """Each signal needs an unsignalled event; reached ones are reset and reused once no queue can wait on them."""
    pipeline = device.pipeline(kernels_spv, "scale_offset", buffers=2, params=3, workgroup_size=(64, 1, 1))
    ones, x, y = device.upload(np.ones(64, np.float32)), device.alloc(64, "float32"), device.alloc(64, "float32")
    other = device.create_queue()
    fence = device.create_fence()
    for value in range(1, 201):
        device.queue.dispatch(pipeline, [ones, y], 1, (np.float32(value), np.float32(0), np.uint32(64)))
        device.queue.signal(fence, value)
        other.wait(fence, value)
        other.dispatch(pipeline, [y, x], 1, (np.float32(1), np.float32(0), np.uint32(64)))
        if value % 10 == 0:
            fence.wait(value, timeout=30)
            other.synchronize()
    assert fence.value == 200
    assert len(fence._vf.events.events) <= 40, len(fence._vf.events.events)
    np.testing.assert_array_equal(device.download(x), np.full(64, 200, np.float32))
    other.close()
    fence.close()
    for buf in (ones, x, y):
        buf.close()
