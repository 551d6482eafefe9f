"""ironaccel backend: PJRT C API plugins (TPU, GPU, CPU) through ctypes.

    import ironaccel
    dev = ironaccel.open("pjrt", 0)                  # a PjrtDevice
    y, = dev.run(STABLEHLO_TEXT, x1, x2)             # compile (cached), upload, execute, download

Lower level: `discover()` lists plugin files, `Client.create(plugin)` makes a
client, `Client.compile` / `Executable.execute_sharded` run on several devices.

Importing this package loads no vendor library; the names below are imported
on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.2.0"

_EXPORTS = {
    "Backend": "backend",
    "PjrtDevice": "device",
    "Client": "client",
    "DeviceInfo": "client",
    "MemorySpace": "client",
    "Buffer": "buffer",
    "Executable": "executable",
    "CompileOptions": "options",
    "PluginLocation": "discovery",
    "discover": "discovery",
    "load_api": "api",
    "PluginApi": "api",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ironaccel_pjrt' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
