"""ironaccel backend: Intel oneAPI Level Zero through ctypes on libze_loader.

Importing this package loads no library: the backend dlopens the loader in
probe().  `results.result_name(code)` names any ze_result_t.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"
__all__ = ["Backend", "result_name"]

if TYPE_CHECKING:
    from .backend import Backend
    from .results import result_name


def __getattr__(name: str) -> Any:
    import importlib

    if name == "Backend":
        return importlib.import_module(f"{__name__}.backend").Backend
    if name == "result_name":
        return importlib.import_module(f"{__name__}.results").result_name
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
