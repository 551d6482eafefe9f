"""ironaccel backend: WebGPU compute on wgpu-py (wgpu-native).

    import ironaccel
    dev = ironaccel.open("webgpu", 0)      # a WebGPUDevice (ComputeDevice, code is WGSL)

Importing this package loads no vendor library and imports no wgpu; the
backend imports wgpu when it is first probed.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.2.0"
__all__ = ["Backend", "WebGPUDevice", "WebGPUBuffer", "WebGPUPipeline", "WebGPUSubmission"]

_LAZY = {
    "Backend": ".backend",
    "WebGPUDevice": ".device",
    "WebGPUBuffer": ".memory",
    "WebGPUPipeline": ".pipeline",
    "WebGPUSubmission": ".submission",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)
