"""Deprecated: the compat surfaces moved to their own distribution, ironaccel-cuda-compat (`ironaccel_cuda_compat`).

`ironaccel_cuda.compat.cuda_core`, `ironaccel_cuda.compat.pycuda` and every module under them still import for
one minor release: importing this package warns (DeprecationWarning) naming the new package, and each
`ironaccel_cuda.compat.X` is the very module `ironaccel_cuda_compat.X`, so objects (and `install()`) are the same
under both names.  Without ironaccel-cuda-compat installed the import fails saying what to install.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

__all__: list[str] = []

OLD = __name__  # ironaccel_cuda.compat
NEW = "ironaccel_cuda_compat"

warnings.warn(f"{OLD} is deprecated and will be removed in a later minor release: the compat surfaces are the "
              f"ironaccel-cuda-compat distribution now; import {NEW} (e.g. `from {NEW} import cuda_core`)",
              DeprecationWarning, stacklevel=2)

try:
    importlib.import_module(NEW)
except ModuleNotFoundError as exc:
    if exc.name != NEW:
        raise
    raise ModuleNotFoundError(f"{OLD} moved to the ironaccel-cuda-compat distribution, which is not installed: "
                              "pip install ironaccel-cuda-compat, then import ironaccel_cuda_compat",
                              name=OLD) from None


class _Loader(importlib.abc.Loader):
    """Gives the already imported module `target` itself under the old name, with its own spec kept."""

    def __init__(self, target: str):
        self.target = target
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        if self.spec is not None:  # the import system set the old name's spec on it: put the module's own back
            module.__spec__ = self.spec


class _Finder(importlib.abc.MetaPathFinder):
    """Answers `ironaccel_cuda.compat.X...` with `ironaccel_cuda_compat.X...`."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(OLD + "."):
            return None
        new = NEW + fullname[len(OLD):]
        try:
            found = importlib.util.find_spec(new)
        except ModuleNotFoundError:
            return None
        if found is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(new), is_package=found.submodule_search_locations
                                              is not None)


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
