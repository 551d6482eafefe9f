"""`install()`: make `import cuda.core` anywhere in the process resolve to the compat.

A meta-path finder placed first answers every `cuda.core[.X]` import with the
compat's module `ironaccel_cuda_compat.cuda_core[.X]` (the very same module object,
so `cuda.core.Device is ironaccel_cuda_compat.cuda_core.Device`).  An installed
cuda-core distribution is never imported while the finder is in place; a name the
compat does not have fails to import as usual.

The install carries into child processes started by `multiprocessing` with the spawn or
forkserver method (fork children inherit it anyway): the preparation data a child reads
before anything else gets one more entry, whose unpickling calls `install()` there, so the
child's imports of `cuda.core` (its target's module, unpickled arguments) resolve to the
compat as well.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from typing import Any

from .._alias import AliasLoader

__all__ = ["install", "installed"]

ALIAS = "cuda.core"
TARGET = __name__.rsplit(".", 1)[0]  # ironaccel_cuda_compat.cuda_core


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds `cuda.core` and `cuda.core.*` as the compat's modules."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname != ALIAS and not fullname.startswith(ALIAS + "."):
            return None
        real = TARGET + fullname[len(ALIAS):]
        try:
            real_spec = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            return None
        if real_spec is None:
            return None
        return importlib.util.spec_from_loader(fullname, AliasLoader(real),
                                               is_package=real_spec.submodule_search_locations is not None)


_finder: _AliasFinder | None = None


def installed() -> bool:
    """True once `install()` has run in this process."""
    return _finder is not None


def install() -> None:
    """Make `import cuda.core` (and `cuda.core.*`) give the compat from now on, in the whole process.

    Call it at start-up, before anything imports cuda.core: if the real cuda.core is
    already imported, RuntimeError says so (its objects cannot be swapped under the
    code that holds them).  Calling it again does nothing.
    """
    global _finder
    if _finder is not None:
        return
    loaded = sys.modules.get(ALIAS)
    if loaded is not None and getattr(loaded, "__name__", None) != TARGET:
        raise RuntimeError("cuda.core is already imported in this process; call "
                           "ironaccel_cuda_compat.cuda_core.install() before anything imports cuda.core")
    _finder = _AliasFinder()
    sys.meta_path.insert(0, _finder)
    _carry_into_children()
    importlib.import_module(ALIAS)


_CHILD_KEY = "ironaccel_cuda_compat_cuda_core"
_original_preparation_data: Any = None


class _InstallInChild:
    """Pickled into a spawned child's preparation data; unpickling it there runs `install()`."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_install_in_child, ())


def _install_in_child() -> bool:
    install()
    return True


def _carry_into_children() -> None:
    global _original_preparation_data
    import multiprocessing.spawn as spawn

    if _original_preparation_data is not None:
        return
    original = _original_preparation_data = spawn.get_preparation_data

    def get_preparation_data(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        data[_CHILD_KEY] = _InstallInChild()
        return data

    spawn.get_preparation_data = get_preparation_data


def _uninstall() -> None:
    """Remove the finder and the aliased modules (for tests of install itself)."""
    global _finder, _original_preparation_data
    if _finder is None:
        return
    if _original_preparation_data is not None:
        import multiprocessing.spawn as spawn

        spawn.get_preparation_data = _original_preparation_data
        _original_preparation_data = None
    try:
        sys.meta_path.remove(_finder)
    except ValueError:
        pass
    _finder = None
    for name in [n for n in sys.modules if n == ALIAS or n.startswith(ALIAS + ".")]:
        del sys.modules[name]
    cuda = sys.modules.get("cuda")
    if cuda is not None and getattr(cuda, "core", None) is not None:
        try:
            delattr(cuda, "core")
        except AttributeError:
            pass
