"""What a Vulkan batch's recording holds: one descriptor set per distinct (pipeline, buffers), not per dispatch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from ironaccel.testing.pytest_plugin import require
from ironaccel_vulkan import Backend

F32 = np.float32
N = 256


@pytest.fixture
def device() -> Iterator[Any]:
    require("vulkan")
    dev = Backend(validation=False).open(0)
    yield dev
    dev.close()


def test_dispatches_on_the_same_buffers_share_a_descriptor_set(device: Any, scale_offset_spv: bytes) -> None:
    so = device.pipeline(scale_offset_spv, buffers=2, params=3)
    x, y, z = device.upload(np.ones(N, F32)), device.alloc(N, "float32"), device.alloc(N, "float32")
    batch = device.batch()
    for k in range(10):  # y = (k + 1) x, then z = 2 y: two distinct buffer pairs
        batch.dispatch(so, [x, y], N // 64, (F32(k + 1), F32(0), np.uint32(N)))
    last = batch.dispatch(so, [y, z], N // 64, (F32(2), F32(0), np.uint32(N)))
    device.submit(batch).wait(timeout=60)
    np.testing.assert_array_equal(device.download(z), np.full(N, 20, F32))
    assert len(batch._recording[0].sets) == 2
    last.update(buffers=[x, z])  # re-recorded: a set for (x, y) and one for (x, z)
    device.submit(batch).wait(timeout=60)
    np.testing.assert_array_equal(device.download(z), np.full(N, 2, F32))
    assert len(batch._recording[0].sets) == 2
    batch.close()
