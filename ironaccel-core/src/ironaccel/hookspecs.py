"""The hooks of the plugin contract: pluggy hook specifications.

Both hooks are plugin API 1.0 (`ironaccel.contract` has the version, what each
version holds, and the deprecation rule); a plugin states the version it
targets in `BackendSpec.plugin_api`.

A backend distribution declares an entry point in the group
``ironaccel.backends`` that names a module; the registry registers that
module with pluggy and calls the hooks below.  Hooks hand over cheap
descriptors only: no hook may import a vendor binding, load a library or touch
hardware.  That happens later, in the backend's own `probe()`.

Every hook implementation is called on its own, so one that raises is reported
against its distribution and does not stop the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .types import BackendSpec

__all__ = ["hookimpl", "ironaccel_backends", "ironaccel_library_dirs"]

PROJECT = "ironaccel"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def ironaccel_backends() -> list[BackendSpec]:  # type: ignore[empty-body]
    """Return the backends this distribution provides.

    The factory is a ``"module:attribute"`` string, imported when the backend
    is first asked for, or a zero-argument callable.

    Example::

        from ironaccel import BackendSpec, Vendor, hookimpl

        @hookimpl
        def ironaccel_backends():
            return [BackendSpec(name="mydev", factory="my_pkg.backend:MyBackend",
                                vendor=Vendor.UNKNOWN, install="pip install my-pkg", plugin_api="1.2")]
    """


@hookspec
def ironaccel_library_dirs(backend: str) -> list[str]:  # type: ignore[empty-body]
    """Return extra folders in which to look for `backend`'s vendor library.

    For distributions that ship or know of a vendor library outside the
    system's search path (a wheel bundling ``libze_loader.so``, a SDK folder).
    Backends search these folders first.

    Example::

        @hookimpl
        def ironaccel_library_dirs(backend):
            if backend == "qnn":
                return ["/opt/qcom/aistack/qairt/lib/x86_64-linux-clang"]
            return []
    """
