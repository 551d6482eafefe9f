"""Helpers that backend probes share: find a vendor library, import a binding.

Each helper either returns what it found or raises `NotAvailable` saying
exactly what was tried (library names, every folder searched, the binding's
distribution), so a backend's probe is a few lines and its reasons are
uniform.  `probe_guard` turns that into a `ProbeResult`.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import ParamSpec

from .errors import NotAvailable
from .types import ProbeResult

__all__ = [
    "LoadedLibrary",
    "load_library",
    "import_binding",
    "require_platform",
    "distribution_version",
    "unavailable",
    "probe_guard",
]

_SYSTEM_DIRS = (
    "/usr/local/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
)


@dataclass(frozen=True)
class LoadedLibrary:
    """A vendor library that was found and loaded."""

    handle: ctypes.CDLL
    path: str
    searched: tuple[str, ...]


def _library_dirs(backend: str, env_var: str | None, extra_dirs: Iterable[str]) -> list[str]:
    dirs: list[str] = []
    if env_var and os.environ.get(env_var):
        dirs.extend(p for p in os.environ[env_var].split(os.pathsep) if p)
    dirs.extend(extra_dirs)
    try:
        from .registry import registry

        dirs.extend(registry.library_dirs(backend))
    except Exception:  # pragma: no cover - a broken hook only loses its dirs
        pass
    dirs.extend(p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p)
    dirs.extend(_SYSTEM_DIRS)
    return list(dict.fromkeys(dirs))


def load_library(
    backend: str,
    names: Sequence[str],
    *,
    env_var: str | None = None,
    extra_dirs: Iterable[str] = (),
    fix: str = "",
    mode: int = ctypes.RTLD_LOCAL,
) -> LoadedLibrary:
    """Find and dlopen the first of `names` (sonames or file names).

    Searched in order: the folders (or file) in `env_var`, `extra_dirs`, the
    `ironaccel_library_dirs` hook, LD_LIBRARY_PATH, the usual system folders,
    then the dynamic loader's own search (ld.so.cache).  Raises NotAvailable
    listing every place searched and, if a file was found but failed to load,
    the loader's message.
    """
    dirs = _library_dirs(backend, env_var, extra_dirs)
    searched: list[str] = []
    load_errors: list[str] = []
    explicit = os.environ.get(env_var, "") if env_var else ""
    if explicit and os.path.isfile(explicit):
        candidates = [explicit]
    else:
        candidates = [os.path.join(d, n) for d in dirs for n in names]
    for path in candidates:
        searched.append(path)
        if os.path.exists(path):
            try:
                return LoadedLibrary(ctypes.CDLL(path, mode=mode), path, tuple(searched))
            except OSError as exc:
                load_errors.append(str(exc))
    for name in names:
        searched.append(f"dlopen({name})")
        try:
            handle = ctypes.CDLL(name, mode=mode)
        except OSError as exc:
            if "cannot open shared object file" not in str(exc):
                load_errors.append(str(exc))
            continue
        return LoadedLibrary(handle, _loaded_path(name) or name, tuple(searched))
    where = ", ".join(dirs) + ", and the dynamic loader's search path"
    reason = f"vendor library not found: {' or '.join(names)} (searched {where})"
    if load_errors:
        reason = f"vendor library found but failed to load: {'; '.join(load_errors)}"
    raise NotAvailable(backend, reason, fix=fix or None, library=names[0], searched=searched)


def _loaded_path(name: str) -> str | None:
    """The file behind an already-loaded soname, read from /proc/self/maps."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if os.path.basename(path).startswith(name):
                    return path
    except OSError:
        pass
    return None


def import_binding(backend: str, module: str, distribution: str, *, fix: str | None = None) -> ModuleType:
    """Import a vendor Python binding, or raise NotAvailable saying it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None)
        if missing and not module.startswith(missing) and missing != module:
            reason = f"the binding {module} ({distribution}) failed to import: {exc}"
        else:
            reason = f"the Python binding {module} is not installed (distribution {distribution})"
        raise NotAvailable(backend, reason, fix=fix or f"pip install {distribution}") from exc
    except Exception as exc:  # a binding that raises at import (missing DLL, ABI mismatch)
        raise NotAvailable(
            backend, f"the binding {module} ({distribution}) raised at import: {type(exc).__name__}: {exc}",
            fix=fix,
        ) from exc


def require_platform(backend: str, *platforms: str, fix: str | None = None) -> None:
    """Raise NotAvailable unless sys.platform starts with one of `platforms`."""
    if not any(sys.platform.startswith(p) for p in platforms):
        raise NotAvailable(
            backend,
            f"runs only on {' or '.join(platforms)}; this is {sys.platform}",
            fix=fix,
        )


def distribution_version(name: str) -> str | None:
    """Installed version of a distribution, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def unavailable(exc: NotAvailable, **extra: object) -> ProbeResult:
    """The ProbeResult that a NotAvailable describes."""
    return ProbeResult(
        backend=exc.backend or "?",
        available=False,
        reason=exc.reason,
        fix=exc.fix or "",
        code=exc.code,
        code_name=exc.code_name,
        searched=exc.searched,
        **extra,  # type: ignore[arg-type]
    )


_P = ParamSpec("_P")


def probe_guard(fn: Callable[_P, ProbeResult]) -> Callable[_P, ProbeResult]:
    """Decorate a probe (function or method) so NotAvailable becomes an unavailable ProbeResult."""

    @functools.wraps(fn)
    def probe(*args: _P.args, **kwargs: _P.kwargs) -> ProbeResult:
        try:
            return fn(*args, **kwargs)
        except NotAvailable as exc:
            return unavailable(exc)

    return probe
