"""ironaccel backend: AWS Neuron runtime (libnrt) through ctypes.

Importing this package loads no library: the backend dlopens libnrt in probe().
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"
__all__ = ["Backend"]

if TYPE_CHECKING:
    from .backend import Backend


def __getattr__(name: str) -> Any:
    if name == "Backend":
        import importlib

        return importlib.import_module(f"{__name__}.backend").Backend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
