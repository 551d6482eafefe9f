"""ironaccel backend: OpenGL 4.3 compute shaders on moderngl with a headless EGL context.

    import ironaccel
    dev = ironaccel.open("opengl")         # an OpenGLDevice (ComputeDevice, code is GLSL 430)

Importing this package loads no vendor library and imports no moderngl; the
backend imports moderngl and creates an EGL context when it is first probed.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.2.0"
__all__ = ["Backend", "OpenGLDevice", "OpenGLBuffer", "OpenGLPipeline", "OpenGLSubmission"]

_LAZY = {
    "Backend": ".backend",
    "OpenGLDevice": ".device",
    "OpenGLBuffer": ".memory",
    "OpenGLPipeline": ".pipeline",
    "OpenGLSubmission": ".submission",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module, __name__), name)
