"""Load the Vulkan loader and the pyvulkan binding, once, only when asked.

pyvulkan (`import vulkan`) dlopens ``libvulkan.so.1`` at import and raises a
bare OSError when it is missing.  We look for the loader ourselves first, with
`ironaccel.probing.load_library`, so the reason lists every place searched,
and a loader found outside the default search path (``IRONACCEL_VULKAN_LOADER``)
is already mapped when pyvulkan asks for it by soname.

Everything else in this package talks to Vulkan through `Binding.ffi` and
`Binding.lib`: pyvulkan's cffi objects, called directly so each call returns its
VkResult (pyvulkan's own wrappers raise exception classes without the code).
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

from ironaccel.compute import ensure_runtime_dir
from ironaccel.probing import distribution_version, import_binding, load_library

__all__ = ["BACKEND", "LOADER_ENV", "LOADER_NAMES", "Binding", "load"]

BACKEND = "vulkan"
LOADER_ENV = "IRONACCEL_VULKAN_LOADER"
LOADER_NAMES: tuple[str, ...] = {
    "win32": ("vulkan-1.dll",),
    "darwin": ("libvulkan.1.dylib", "libvulkan.dylib", "libMoltenVK.dylib"),
}.get(sys.platform, ("libvulkan.so.1", "libvulkan.so"))
LOADER_FIX = (
    "install the Vulkan loader and a driver (Debian/Ubuntu: apt-get install libvulkan1 mesa-vulkan-drivers; "
    f"NVIDIA: the driver's ICD json, pointed at by VK_DRIVER_FILES), or set {LOADER_ENV} to libvulkan.so.1"
)


@dataclass(frozen=True)
class Binding:
    """pyvulkan's cffi `ffi` and `lib`, the loader's path and the binding's version."""

    ffi: Any
    lib: Any
    loader_path: str
    binding_version: str | None
    module: Any  # the `vulkan` module, for its constants


_lock = threading.Lock()
_binding: Binding | None = None


def load(names: tuple[str, ...] = LOADER_NAMES) -> Binding:
    """The loaded binding; raises NotAvailable saying what is missing and where it looked."""
    global _binding
    if _binding is not None and names == LOADER_NAMES:
        return _binding
    with _lock:
        if _binding is not None and names == LOADER_NAMES:
            return _binding
        ensure_runtime_dir()  # Mesa's window-system code complains on every instance where XDG_RUNTIME_DIR is missing
        loader = load_library(BACKEND, list(names), env_var=LOADER_ENV, fix=LOADER_FIX)
        module = import_binding(BACKEND, "vulkan", "vulkan", fix="pip install vulkan (pyvulkan)")
        binding = Binding(
            ffi=module.ffi,
            lib=module.lib,
            loader_path=loader.path,
            binding_version=distribution_version("vulkan") or getattr(module, "__version__", None),
            module=module,
        )
        if names == LOADER_NAMES:
            _binding = binding
        return binding

