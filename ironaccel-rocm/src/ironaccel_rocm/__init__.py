"""ironaccel backend: AMD ROCm/HIP on hip-python, and a hipRTC compiler.

    from ironaccel_rocm import Program
    code = Program(source).compile(arch="gfx90a")   # AMDGPU code object bytes, no GPU needed

Importing this package loads no vendor library and imports no binding: the
backend loads hip-python in probe()/open(), the compiler loads hipRTC on
the first compile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"
__all__ = ["Backend", "Program", "CodeObject", "HipDevice"]

if TYPE_CHECKING:
    from .backend import Backend
    from .compiler import CodeObject, Program
    from .device import HipDevice

_LAZY = {
    "Backend": "backend",
    "Program": "compiler",
    "CodeObject": "compiler",
    "HipDevice": "device",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
