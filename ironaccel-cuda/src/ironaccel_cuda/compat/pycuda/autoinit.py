"""import pycuda.autoinit: initialise CUDA and push a default context (popped at exit), as PyCUDA does.

`context` is the context (created with `Device.make_context()` on the device
CUDA_DEVICE names, else the first that takes one) and `device` its device.
"""

from __future__ import annotations

import atexit
from typing import Any

from . import driver as cuda
from .tools import clear_context_caches, make_default_context

cuda.init()

context: Any = make_default_context()
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
