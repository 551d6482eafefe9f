"""Bad input that reached wgpu unchecked: binding and params counts past the device's limits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ironaccel.errors import InvalidArgument
from ironaccel.testing.conformance import scale_offset

SCALE_OFFSET = (Path(__file__).with_name("kernels") / "scale_offset.wgsl").read_text()

pytestmark = pytest.mark.backend("webgpu")


def test_more_buffers_than_the_device_binds_are_refused_at_pipeline(device) -> None:
    limit = int(device.gpu.limits["max-storage-buffers-per-shader-stage"])
    # 10**9 used to build a bind-group layout of 10**9 entries: the call never returned.
    for buffers in (limit + 1, 10**9, 1 << 70):
        with pytest.raises(InvalidArgument) as info:
            device.pipeline(SCALE_OFFSET, buffers=buffers, params=3)
        assert info.value.op == "pipeline"
        assert info.value.detail == f"buffers={buffers} is over max-storage-buffers-per-shader-stage ({limit})"


def test_more_params_than_a_uniform_buffer_holds_are_refused_at_pipeline(device) -> None:
    limit = int(device.gpu.limits["max-uniform-buffer-binding-size"]) // 4
    # limit + 1 used to pass pipeline() and fail at dispatch; 10**9 let wgpu's GPUValidationError out of
    # create_buffer, and 1 << 70 an OverflowError.
    for params in (limit + 1, 10**9, 1 << 70):
        with pytest.raises(InvalidArgument) as info:
            device.pipeline(SCALE_OFFSET, buffers=2, params=params)
        assert info.value.op == "pipeline"
        assert info.value.detail == f"params={params} is over max-uniform-buffer-binding-size / 4 ({limit})"
    x = np.arange(100, dtype=np.float32)  # the device still works
    pipe = device.pipeline(SCALE_OFFSET, buffers=2, params=3)
    np.testing.assert_array_equal(scale_offset(device, x, 2.0, 1.0, pipe), 2 * x + 1)
