"""cuda.core's `texture` (CUDA arrays, textures, surfaces): out of the compat's scope."""

from __future__ import annotations

from .. import _needs
from .._missing import missing_class

__all__ = [
    "MipmappedArray", "MipmappedArrayOptions", "OpaqueArray", "OpaqueArrayOptions", "ResourceDescriptor",
    "SurfaceObject", "TextureObject", "TextureObjectOptions",
]

MipmappedArray = missing_class("MipmappedArray", _needs.TEXTURES, __name__)
MipmappedArrayOptions = missing_class("MipmappedArrayOptions", _needs.TEXTURES, __name__)
OpaqueArray = missing_class("OpaqueArray", _needs.TEXTURES, __name__)
OpaqueArrayOptions = missing_class("OpaqueArrayOptions", _needs.TEXTURES, __name__)
ResourceDescriptor = missing_class("ResourceDescriptor", _needs.TEXTURES, __name__)
SurfaceObject = missing_class("SurfaceObject", _needs.TEXTURES, __name__)
TextureObject = missing_class("TextureObject", _needs.TEXTURES, __name__)
TextureObjectOptions = missing_class("TextureObjectOptions", _needs.TEXTURES, __name__)
