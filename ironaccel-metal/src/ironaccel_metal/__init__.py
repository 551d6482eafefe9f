"""ironaccel backend: Apple Metal on pyobjc-framework-Metal (macOS only).

Importing this package imports no binding: the backend imports Metal in probe().
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
