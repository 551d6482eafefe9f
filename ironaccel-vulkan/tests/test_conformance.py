"""The core conformance kit, run against the Vulkan backend (lavapipe on CI, the H200 on the GPU machine)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ironaccel.testing.conformance import BackendConformance, ComputeDeviceConformance
from ironaccel.testing.execution import ExecutionConformance

KERNELS = Path(__file__).resolve().parent / "kernels"
SCALE_OFFSET = (KERNELS / "scale_offset.spv").read_bytes()
TYPED_PARAMS = (KERNELS / "typed_params.spv").read_bytes()
CONSTANTS = (KERNELS / "constants.spv").read_bytes()


def truncated_mid_instruction(spv: bytes) -> bytes:
    """A module whose last instruction claims more words than remain: structurally broken SPIR-V."""
    words = np.frombuffer(spv, dtype="<u4")
    return np.concatenate([words, np.array([(9 << 16) | 59, 1], dtype="<u4")]).tobytes()  # OpVariable, 9 words


class TestVulkanBackend(BackendConformance):
    backend_name = "vulkan"
    vendor_modules = ("vulkan", "vulkan._vulkan", "_cffi_backend")


@pytest.mark.backend("vulkan")
class TestVulkanCompute(ComputeDeviceConformance, ExecutionConformance):
    backend_name = "vulkan"
    scale_offset_code = SCALE_OFFSET
    broken_code = truncated_mid_instruction(SCALE_OFFSET)
    entry = "main"
    typed_params_code = TYPED_PARAMS
    constants_code = CONSTANTS
