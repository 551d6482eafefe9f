"""The one probe pattern, and the helpers that probes share.

A backend subclasses `ProbedBackend` and writes its probe as steps in
`_probe(facts)`: each step records what it learned in `facts` (versions, the
library path, extras) or raises `NotAvailable` naming the step that failed.
`probe()` runs the steps and turns either outcome into a `ProbeResult` with
every fact gathered so far; `_state()` hands `devices()` and `open()` what the
last successful run returned, running the steps first if none has.

The registry is the only cache of probe results: it calls `probe()` once per
backend and `refresh()` when asked to forget, which drops the backend's state
so that the next call runs the steps again.

The helpers (`load_library`, `import_binding`, `require_platform`) return what
they found or raise `NotAvailable` saying exactly what was tried (library
names, every folder searched, the binding's distribution), so the steps are a
few lines and the reasons are uniform.  `check_ordinal` is the one check of
`open(ordinal)`.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import operator
import os
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType
from typing import Any, Generic, ParamSpec, TypeVar

from .contract import deprecated
from .errors import InvalidArgument, NotAvailable
from .types import ProbeResult

__all__ = [
    "ProbedBackend",
    "ProbeFacts",
    "check_ordinal",
    "LoadedLibrary",
    "load_library",
    "loaded_library",
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
    symbols: Sequence[str] = (),
) -> LoadedLibrary:
    """Find and dlopen the first of `names` (sonames or file names) that exports every one of `symbols`.

    Searched in order: the folders (or file) in `env_var`, `extra_dirs`, the
    `ironaccel_library_dirs` hook, LD_LIBRARY_PATH, the usual system folders,
    then the dynamic loader's own search (ld.so.cache).  The fix hint names
    `env_var` when there is one.  A file named by
    `env_var` is the only candidate: if it fails to load or lacks a symbol,
    that is the answer, not a library found elsewhere.  Raises NotAvailable
    listing every place searched and, if a file was found but failed to load
    or lacked symbols, why.
    """
    dirs = _library_dirs(backend, env_var, extra_dirs)
    if env_var:
        fix = f"{fix}; or set {env_var} to the library file or its folder" if fix else (
            f"set {env_var} to the library file or its folder")
    searched: list[str] = []
    load_errors: list[str] = []
    explicit = os.environ.get(env_var, "") if env_var else ""

    def accept(handle: ctypes.CDLL, path: str) -> LoadedLibrary | None:
        missing = [name for name in symbols if not hasattr(handle, name)]
        if not missing:
            return LoadedLibrary(handle, path, tuple(searched))
        load_errors.append(f"{path} loaded but does not export {', '.join(missing)}")
        return None

    if explicit and os.path.isfile(explicit):
        searched.append(explicit)
        try:
            found = accept(ctypes.CDLL(explicit, mode=mode), explicit)
        except OSError as exc:
            load_errors.append(str(exc))
            found = None
        if found is not None:
            return found
        raise NotAvailable(backend, f"{env_var}={explicit} cannot be used: {load_errors[0]}", fix=fix or None,
                           library=names[0], searched=searched)
    for path in (os.path.join(d, n) for d in dirs for n in names):
        searched.append(path)
        if os.path.exists(path):
            try:
                found = accept(ctypes.CDLL(path, mode=mode), path)
            except OSError as exc:
                load_errors.append(str(exc))
                continue
            if found is not None:
                return found
    for name in names:
        searched.append(f"dlopen({name})")
        try:
            handle = ctypes.CDLL(name, mode=mode)
        except OSError as exc:
            if "cannot open shared object file" not in str(exc):
                load_errors.append(str(exc))
            continue
        found = accept(handle, loaded_library(name) or name)
        if found is not None:
            return found
    where = ", ".join(dirs) + ", and the dynamic loader's search path"
    reason = f"vendor library not found: {' or '.join(names)} (searched {where})"
    if load_errors:
        reason = f"vendor library found but not usable: {'; '.join(dict.fromkeys(load_errors))}"
    raise NotAvailable(backend, reason, fix=fix or None, library=names[0], searched=searched)


def loaded_library(stem: str) -> str | None:
    """The path of the library loaded in this process whose file name starts with `stem`, or None.

    Read from /proc/self/maps (Linux); `stem` is a soname or its start: ``"libcuda.so"``, ``"libamdhip64"``.
    """
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if path.startswith("/") and os.path.basename(path).startswith(stem):
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
    return ProbeResult.from_error(exc, **extra)


_P = ParamSpec("_P")


@deprecated("ironaccel.probing.probe_guard")
def probe_guard(fn: Callable[_P, ProbeResult]) -> Callable[_P, ProbeResult]:
    """Deprecated (plugin API 1.2; removed without warning in 1.1, restored): decorate a probe, function or
    method, so that NotAvailable becomes an unavailable ProbeResult.  Use `ProbedBackend` instead."""

    @functools.wraps(fn)
    def probe(*args: _P.args, **kwargs: _P.kwargs) -> ProbeResult:
        try:
            return fn(*args, **kwargs)
        except NotAvailable as exc:
            return unavailable(exc)

    return probe


def check_ordinal(backend: str, ordinal: object, count: int) -> int:
    """`ordinal` as an int when it names one of `count` devices; else InvalidArgument (op "open") saying why.

    A bool or a non-integer (``"0"``, ``1.0``) is refused as the wrong type, whatever its value.
    """
    if isinstance(ordinal, bool):
        index = None
    else:
        try:
            index = operator.index(ordinal)  # type: ignore[arg-type]
        except TypeError:
            index = None
    if index is None:
        raise InvalidArgument(backend, "open", detail=(
            f"the ordinal must be an int, got {type(ordinal).__name__} {ordinal!r}"))
    if not 0 <= index < count:
        where = f"the valid ordinals are 0..{count - 1}" if count else "there is no device"
        raise InvalidArgument(backend, "open", detail=f"ordinal {index} is out of range: {where}")
    return index


class ProbeFacts:
    """What one probe run has learned so far; it becomes the ProbeResult, available or not.

    Steps call `record(library_path=..., runtime_version=...)` and `extra(key=value)`
    as they learn things; the last step calls `found(reason, device_count)`.
    """

    FIELDS = ("driver_version", "runtime_version", "binding_version", "library_path")

    def __init__(self, backend: str):
        self.backend = backend
        self.driver_version: str | None = None
        self.runtime_version: str | None = None
        self.binding_version: str | None = None
        self.library_path: str | None = None
        self.extras: dict[str, Any] = {}
        self.reason: str | None = None
        self.device_count = 0

    def record(self, **fields: str | None) -> None:
        """Set ProbeResult fields: driver_version, runtime_version, binding_version, library_path."""
        unknown = sorted(set(fields) - set(self.FIELDS))
        if unknown:
            raise TypeError(f"not probe facts: {unknown}; use extra() for anything else")
        for key, value in fields.items():
            setattr(self, key, value)

    def extra(self, **values: Any) -> None:
        """Add entries to the ProbeResult's extras."""
        self.extras.update(values)

    def found(self, reason: str, device_count: int) -> None:
        """The probe passed: what it found, in a few words, and how many devices."""
        self.reason, self.device_count = reason, device_count

    def available(self) -> ProbeResult:
        """The ProbeResult of a probe that found the backend usable (after `found()` was called)."""
        if self.reason is None:
            raise TypeError(f"the {self.backend} probe returned without calling facts.found(reason, device_count)")
        return ProbeResult(self.backend, True, reason=self.reason, driver_version=self.driver_version,
                           runtime_version=self.runtime_version, binding_version=self.binding_version,
                           library_path=self.library_path, device_count=self.device_count, extras=dict(self.extras))

    def unavailable(self, exc: NotAvailable) -> ProbeResult:
        """The ProbeResult for a probe that failed with `exc`, keeping the versions and paths learnt so far."""
        return unavailable(exc, driver_version=self.driver_version, runtime_version=self.runtime_version,
                           binding_version=self.binding_version, library_path=self.library_path,
                           extras=dict(self.extras))


StateT = TypeVar("StateT")


class ProbedBackend(Generic[StateT]):
    """Base of a Backend whose probe is a list of steps, run by `probe()` and reused by `devices()`/`open()`.

    Subclasses set `name` and implement `_probe(facts)`, which returns the state
    that `devices()` and `open()` need (the descriptors, a loaded library...),
    and read it back with `_state()`.  Nothing is cached across `refresh()`.
    Thread-safe: one probe run at a time per backend object.
    """

    name: str

    def __init__(self) -> None:
        self._probe_lock = threading.RLock()
        self._probed: tuple[StateT] | None = None

    def _probe(self, facts: ProbeFacts) -> StateT:
        """The probe steps; record facts, raise NotAvailable naming the failed step, call facts.found()."""
        raise NotImplementedError

    def probe(self) -> ProbeResult:
        """Run the probe steps now; never raises for an unusable backend (the result says why)."""
        facts = ProbeFacts(self.name)
        with self._probe_lock:
            self._probed = None
            try:
                state = self._probe(facts)
            except NotAvailable as exc:
                return facts.unavailable(exc)
            result = facts.available()
            self._probed = (state,)
            return result

    def _state(self) -> StateT:
        """What the last successful probe returned, probing first if none has; NotAvailable says why not."""
        with self._probe_lock:
            if self._probed is None:
                self._probed = (self._probe(ProbeFacts(self.name)),)
            return self._probed[0]

    def refresh(self) -> None:
        """Forget what the last probe found; the next probe(), devices() or open() runs the steps again."""
        with self._probe_lock:
            self._probed = None
