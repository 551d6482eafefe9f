"""import pycuda.autoinit: initialise CUDA and push a default context (popped at exit).

`context` is the device's primary context, retained and pushed, on the device CUDA_DEVICE
names, else the first that takes one; `device` is its device.  PyCUDA's own autoinit creates
a fresh context (`make_context`); here it is the primary one (as `pycuda.autoprimaryctx`),
because the memory, streams and modules of CuPy, PyTorch, the CUDA runtime and ironaccel
itself all live in the primary context: a kernel of a separate context launched on their
streams or memory fails (`cuLaunchKernel failed: invalid resource handle`).
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
