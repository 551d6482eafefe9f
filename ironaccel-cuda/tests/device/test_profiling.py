"""NVTX ranges and markers around real work, and the driver's profiler start/stop."""

from __future__ import annotations

import pytest

import ironaccel_cuda as cu
from ironaccel import InvalidArgument

pytestmark = pytest.mark.backend("cuda")


def test_nvtx_and_profiler(dev, kernels):
    pytest.importorskip("nvtx", reason="NVIDIA's nvtx package (pip install nvtx) carries the NVTX calls")
    cu.profiler_start()
    buf = dev.alloc(256, "float32")
    with cu.nvtx_range("saxpy", color="green"):
        cu.nvtx_mark("before")
        kernels.function("saxpy").launch(1, 256, 1.0, buf, buf, 0)
        with cu.nvtx_range("inner", domain="tests"):
            dev.synchronize()
    cu.nvtx_push("manual")
    cu.nvtx_pop()
    cu.profiler_stop()
    buf.close()
    for bad in ("", "a\0b", 3):
        with pytest.raises(InvalidArgument):
            cu.nvtx_mark(bad)
    for domain in (5, b"tests"):
        with pytest.raises(InvalidArgument):
            cu.nvtx_push("x", domain=domain)
        with pytest.raises(InvalidArgument):
            cu.nvtx_pop(domain)
        with pytest.raises(InvalidArgument):
            cu.nvtx_mark("x", domain=domain)
