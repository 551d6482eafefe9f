"""cuda.core's TMA tensor map descriptors: out of the compat's scope."""

from __future__ import annotations

from . import _needs
from ._missing import missing_class

__all__ = ["TensorMapDescriptor", "TensorMapDescriptorOptions"]

TensorMapDescriptor = missing_class("TensorMapDescriptor", _needs.TENSOR_MAP, __name__)
TensorMapDescriptorOptions = missing_class("TensorMapDescriptorOptions", _needs.TENSOR_MAP, __name__)
