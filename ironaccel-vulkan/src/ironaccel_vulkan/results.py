"""VkResult codes: their names, and the typed ironaccel error for each.

`check(op, result)` is the one place a VkResult becomes an exception, so every
driver failure names its call (`op="vkAllocateMemory"`), its code and name.
"""

from __future__ import annotations

from typing import NoReturn

from ironaccel.errors import DriverError, OutOfMemory

from .binding import BACKEND

__all__ = ["RESULT_NAMES", "result_name", "check", "raise_for"]

VK_SUCCESS = 0
VK_NOT_READY = 1
VK_TIMEOUT = 2
VK_ERROR_OUT_OF_HOST_MEMORY = -1
VK_ERROR_OUT_OF_DEVICE_MEMORY = -2
VK_ERROR_INITIALIZATION_FAILED = -3
VK_ERROR_DEVICE_LOST = -4
VK_ERROR_LAYER_NOT_PRESENT = -6
VK_ERROR_EXTENSION_NOT_PRESENT = -7
VK_ERROR_INCOMPATIBLE_DRIVER = -9
VK_ERROR_FRAGMENTED_POOL = -12
VK_ERROR_OUT_OF_POOL_MEMORY = -1000069000
VK_ERROR_VALIDATION_FAILED_EXT = -1000011001

# The codes a compute user meets; `result_name` falls back to pyvulkan's enum table for the rest.
RESULT_NAMES: dict[int, str] = {
    0: "VK_SUCCESS",
    1: "VK_NOT_READY",
    2: "VK_TIMEOUT",
    3: "VK_EVENT_SET",
    4: "VK_EVENT_RESET",
    5: "VK_INCOMPLETE",
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY",
    -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED",
    -4: "VK_ERROR_DEVICE_LOST",
    -5: "VK_ERROR_MEMORY_MAP_FAILED",
    -6: "VK_ERROR_LAYER_NOT_PRESENT",
    -7: "VK_ERROR_EXTENSION_NOT_PRESENT",
    -8: "VK_ERROR_FEATURE_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER",
    -10: "VK_ERROR_TOO_MANY_OBJECTS",
    -11: "VK_ERROR_FORMAT_NOT_SUPPORTED",
    -12: "VK_ERROR_FRAGMENTED_POOL",
    -13: "VK_ERROR_UNKNOWN",
    -1000069000: "VK_ERROR_OUT_OF_POOL_MEMORY",
    -1000011001: "VK_ERROR_VALIDATION_FAILED_EXT",
    -1000012000: "VK_ERROR_INVALID_SHADER_NV",
}
_OOM = (VK_ERROR_OUT_OF_HOST_MEMORY, VK_ERROR_OUT_OF_DEVICE_MEMORY)


def result_name(code: int) -> str:
    """The VkResult's symbolic name, e.g. -9 -> "VK_ERROR_INCOMPATIBLE_DRIVER"."""
    name = RESULT_NAMES.get(code)
    if name is None:
        try:
            from .binding import load

            name = load().ffi.typeof("VkResult").elements.get(code)
        except Exception:
            name = None
    return name or f"VkResult({code})"


def raise_for(op: str, result: int, detail: str | None = None) -> NoReturn:
    """Raise the typed error for a failed VkResult."""
    cls = OutOfMemory if result in _OOM else DriverError
    raise cls(BACKEND, op, result, result_name(result), detail)


def check(op: str, result: int) -> None:
    """Raise unless `result` is VK_SUCCESS."""
    if result != VK_SUCCESS:
        raise_for(op, result)
