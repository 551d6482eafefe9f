"""The conformance suite and the Vulkan-specific paths under the Khronos validation layer.

Devices here are opened with the layer enabled in-process (with synchronization
validation where the layer offers it) and a debug-utils messenger; conftest's
autouse fixture fails any test during which the layer reported an error.  The
canary tests prove the net is live: a deliberate misuse is reported, and
invalid SPIR-V becomes a CompileError carrying the layer's message.

Without the layer installed these tests skip, unless IRONACCEL_VULKAN_VALIDATION
asks for it, then they fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ironaccel.errors import CompileError
from ironaccel.testing.conformance import ComputeDeviceConformance
from ironaccel.testing.pytest_plugin import require
from ironaccel_vulkan import validation

KERNELS = Path(__file__).resolve().parent / "kernels"
SCALE_OFFSET = (KERNELS / "scale_offset.spv").read_bytes()
TYPED_PARAMS = (KERNELS / "typed_params.spv").read_bytes()
CONSTANTS = (KERNELS / "constants.spv").read_bytes()
BROKEN = np.concatenate([np.frombuffer(SCALE_OFFSET, "<u4"), np.array([(9 << 16) | 59, 1], "<u4")]).tobytes()


def validated_backend() -> Any:
    """A Backend with the validation layer on; skips (or fails when required) if the layer is missing."""
    from ironaccel_vulkan import Backend

    require("vulkan")
    backend = Backend(validation=True)
    result = backend.probe()
    if not result.available:
        if validation.requested():
            pytest.fail(f"validation required by {validation.VALIDATION_ENV}: {result.reason}")
        pytest.skip(result.reason)
    return backend


class TestValidatedCompute(ComputeDeviceConformance):
    plugin_api = "1.2"  # the execution model too, under the validation layer
    backend_name = "vulkan"
    scale_offset_code = SCALE_OFFSET
    broken_code = BROKEN
    typed_params_code = TYPED_PARAMS
    constants_code = CONSTANTS

    def open_device(self) -> Any:
        device = validated_backend().open(0)
        assert device._state.instance.validation_layer
        return device


class TestValidatedStagedCompute(TestValidatedCompute):
    """The staged path (device-local buffers, chunked copies through the staging ring), validated."""

    def open_device(self) -> Any:
        return validated_backend().open(0, memory="staged", staging_chunk_bytes=8192)


@pytest.fixture
def device() -> Any:
    dev = validated_backend().open(0)
    yield dev
    dev.close()


def test_layer_and_messenger_are_live(device: Any) -> None:
    core = device._state
    assert core.instance.validation_layer and core.instance.messenger is not None


@pytest.mark.validation_errors_expected
def test_misuse_is_reported(device: Any) -> None:
    """A zero-size buffer violates VUID-VkBufferCreateInfo-size-00912; the messenger must catch it."""
    core = device._state
    ffi, lib = core.ffi, core.lib
    info = ffi.new("VkBufferCreateInfo*", {"sType": 12, "size": 0, "usage": 0x20})
    out = ffi.new("VkBuffer*")
    result = lib.vkCreateBuffer(core.handle, info, ffi.NULL, out)
    if result == 0 and out[0]:
        lib.vkDestroyBuffer(core.handle, out[0], ffi.NULL)
    found = [m for m in device.validation_messages() if m.is_error]
    assert any("00912" in m.id_name or "00912" in m.text for m in found), found
    assert validation.errors()


def test_invalid_spirv_is_refused_before_the_driver(device: Any) -> None:
    """Well-formed but invalid SPIR-V (a 16-bit float without the Float16 capability) never reaches the driver:
    SPIRV-Tools refuses it first, so not even the validation layer sees it."""
    words = np.frombuffer(SCALE_OFFSET, "<u4").copy()
    i = 5
    while i < words.size:
        count, opcode = int(words[i]) >> 16, int(words[i]) & 0xFFFF
        if opcode == 22:  # OpTypeFloat %id 32
            words[i + 2] = 16
            break
        i += count
    with pytest.raises(CompileError) as info:
        device.pipeline(words.tobytes(), buffers=2, params=3)
    assert info.value.op == "pipeline" and "SPIRV-Tools" in info.value.log and "Float16" in info.value.log
    assert not [m for m in device.validation_messages() if m.is_error]
