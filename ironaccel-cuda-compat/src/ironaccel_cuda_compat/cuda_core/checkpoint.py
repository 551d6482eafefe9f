"""cuda.core's `checkpoint` (CUDA process checkpointing): out of the compat's scope."""

from __future__ import annotations

from . import _needs
from ._missing import missing_class

__all__ = ["Process"]

Process = missing_class("Process", _needs.CHECKPOINT, __name__)
