"""cuda.core's graphics interop (`GraphicsResource`): out of the compat's scope."""

from __future__ import annotations

from . import _needs
from ._missing import missing_class

__all__ = ["GraphicsResource"]

GraphicsResource = missing_class("GraphicsResource", _needs.GRAPHICS, __name__)
