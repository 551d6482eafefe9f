"""The import loader both surfaces' `install()` use: `pycuda.X` / `cuda.core.X` is the surface's own module.

`AliasLoader(target)` returns the already imported module `target` itself (not a copy), so both names give
the same objects.  The import system sets the alias's spec on the module it gets back; `exec_module` puts the
module's own spec back, because with `__spec__.parent` differing from `__package__` every relative import
inside the module's functions warns (DeprecationWarning: __package__ != __spec__.parent), which tests that
count warnings see (cuda.core's test_kernel_from_handle_library_mismatch_warning did).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
from types import ModuleType

__all__ = ["AliasLoader"]


class AliasLoader(importlib.abc.Loader):
    """Loads an alias as module `target`; with `target` None, fails the import with `missing` as the message."""

    def __init__(self, target: str | None, missing: str | None = None):
        self.target = target
        self.missing = missing
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        if self.target is None:
            raise ModuleNotFoundError(self.missing, name=spec.name)
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The target is already executed: only its own spec goes back."""
        if self.spec is not None:
            module.__spec__ = self.spec
