"""import pycuda.autoprimaryctx: like autoinit, but retains and pushes the device's primary context.

The primary context is the one the CUDA runtime, PyTorch, CuPy and ironaccel
itself use, so memory and kernels pass between them freely.
"""

from __future__ import annotations

import atexit
from typing import Any

from . import driver as cuda
from .tools import clear_context_caches, make_default_context

cuda.init()


def _retain_primary_context(dev: Any) -> Any:
    ctx = dev.retain_primary_context()
    ctx.push()
    return ctx


context: Any = make_default_context(_retain_primary_context)
device = context.get_device()


def _finish_up() -> None:
    global context
    if context is not None:
        try:
            context.pop()
        except cuda.Error:
            pass
        context = None
        clear_context_caches()


atexit.register(_finish_up)
