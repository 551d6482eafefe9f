"""ironaccel backend: Vulkan compute on the vulkan package (pyvulkan).

Importing this package loads no vendor library and imports no binding; the
backend does that in `probe()` and `open()`.  Public names load lazily:

    from ironaccel_vulkan import Backend, VulkanDevice
"""

from __future__ import annotations

from typing import Any

__version__ = "0.2.0"
__all__ = ["Backend", "VulkanDevice", "VulkanBuffer", "VulkanPipeline", "VulkanSubmission", "validation"]

_LAZY = {
    "Backend": ("backend", "Backend"),
    "VulkanDevice": ("device", "VulkanDevice"),
    "VulkanBuffer": ("memory", "VulkanBuffer"),
    "VulkanPipeline": ("pipeline", "VulkanPipeline"),
    "VulkanSubmission": ("submission", "VulkanSubmission"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    if name == "validation":
        import importlib

        return importlib.import_module(f"{__name__}.validation")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
