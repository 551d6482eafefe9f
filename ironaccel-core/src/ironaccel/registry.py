"""BackendRegistry: discovery, isolation, lazy probing, selection.

Life of a backend:

1. ``import ironaccel`` reads nothing and does not import pluggy.  The first
   registry call that needs the backends (``names()``, ``probe()``,
   ``open()``, ``devices()``, ``failures()``, the CLI's survey...) reads the
   entry points of the group ``ironaccel.backends`` -- metadata only, no
   plugin code runs -- and a ``BackendRegistry`` built by hand reads them
   when it is built.
2. That call then imports each allowed plugin
   module and calls its hooks, each in its own ``try``: a plugin that fails to
   import or raises in a hook is recorded as a `PluginFailure` (distribution,
   version, stage, error) and the others carry on.  A backend whose
   `BackendSpec.plugin_api` this core cannot load (another major version, or a
   newer minor than `ironaccel.PLUGIN_API`) is recorded at stage "contract"
   and reported unavailable with that reason; its factory is never imported.
3. ``probe(name)`` builds that backend (its factory is imported only now) and
   probes it, once, in a thread of its own with a deadline: a probe that has
   not answered in time is reported unavailable ("probe timed out after N s"),
   is never started a second time while it still runs, and its own result
   replaces that report once it returns.  The result, and
   a failing factory, are cached here (the only cache) until ``refresh()``,
   which also calls the backend's own ``refresh()`` when it has one.
   Probing one backend never probes another.

Environment variables, read at every call:

* ``IRONACCEL_BACKENDS=cuda,vulkan``   only these backends, in this order.
* ``IRONACCEL_DISABLE=pjrt,rocm``      never these (``*`` disables all).
* ``IRONACCEL_PLUGINS=ironaccel-cuda`` load only these distributions (empty: none).
* ``IRONACCEL_PROBE_TIMEOUT=5``        seconds each probe may take (``0``: no deadline).

A name in IRONACCEL_BACKENDS or IRONACCEL_DISABLE that is neither installed nor
first-party warns (RuntimeWarning, once, with a did-you-mean).
"""

from __future__ import annotations

import _thread
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable
from importlib import import_module
from typing import TYPE_CHECKING, Any

from .contract import PLUGIN_API, incompatible
from .errors import DuplicateBackend, InvalidArgument, NotAvailable, PluginError

if TYPE_CHECKING:
    import threading

    import pluggy

    from .types import BackendReport, BackendSpec, DeviceDescriptor, PluginFailure, ProbeResult

# ironaccel.types is imported on first use, not at `import ironaccel`: building its
# enums and dataclasses is most of what importing the package would otherwise cost.
# pluggy (through ironaccel._manager), difflib, math and threading likewise, on the registry's first use
# (its own lock is a _thread.RLock, which is what threading.RLock() makes).

__all__ = [
    "BackendRegistry", "registry", "scan_entry_points", "probe_timeout", "install_hint",
    "ENV_BACKENDS", "ENV_DISABLE", "ENV_PLUGINS", "ENV_PROBE_TIMEOUT", "DEFAULT_PROBE_TIMEOUT",
]

GROUP = "ironaccel.backends"
ENV_BACKENDS = "IRONACCEL_BACKENDS"
ENV_DISABLE = "IRONACCEL_DISABLE"
ENV_PLUGINS = "IRONACCEL_PLUGINS"
ENV_PROBE_TIMEOUT = "IRONACCEL_PROBE_TIMEOUT"
DEFAULT_PROBE_TIMEOUT = 10.0

#: First-party backends and what installs each, so that asking for one that is not installed says
#: what to install.  Kept equal to the repository's backends.toml by ironaccel-core/tests/test_manifest.py.
FIRST_PARTY: dict[str, str] = {
    "cuda": "pip install ironaccel-cuda",
    "rocm": "pip install 'ironaccel-rocm[hip]'",
    "metal": "pip install 'ironaccel-metal[metal]'",
    "vulkan": "pip install ironaccel-vulkan",
    "qnn": "pip install ironaccel-qnn",
    "levelzero": "pip install ironaccel-levelzero",
    "pjrt": "pip install ironaccel-pjrt",
    "neuron": "pip install ironaccel-neuron",
    "webgpu": "pip install ironaccel-webgpu",
    "opengl": "pip install ironaccel-opengl",
}



def install_hint(name: str) -> str:
    """What installs first-party backend `name`, true from the index and from a checkout; "" if not first-party.

    ``pip install ironaccel-vulkan (from the index, or `pip install ./ironaccel-vulkan` from a checkout)``.
    """
    command = FIRST_PARTY.get(name)
    if not command:
        return ""
    local = command.replace(f"ironaccel-{name}", f"./ironaccel-{name}")
    return f"{command} (from the index, or `{local}` from a checkout)"


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    """" did you mean 'vulkan'?" for a near miss of one of `known` (case first), else ""."""
    import difflib

    choices = sorted(set(known))
    by_case = [k for k in choices if k.lower() == name.lower()]
    close = by_case or difflib.get_close_matches(name.lower(), choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


#: Stages at which a plugin fails before it has registered any backend.
_LOAD_STAGES = ("import", "register", "hook")


class _EntryPoint:
    """One entry point of the group, read from a distribution's metadata."""

    __slots__ = ("name", "value", "distribution", "version")

    def __init__(self, name: str, value: str, distribution: str | None, version: str | None):
        self.name, self.value, self.distribution, self.version = name, value, distribution, version

    @property
    def label(self) -> str:
        return f"{self.name} = {self.value}"


class _Registered:
    """A backend name claimed by a distribution (and any rivals claiming it too)."""

    __slots__ = ("spec", "distribution", "version", "rivals", "incompatible")

    def __init__(self, spec: BackendSpec, distribution: str | None, version: str | None):
        self.spec, self.distribution, self.version = spec, distribution, version
        self.rivals: list[tuple[str, str | None]] = []  # (distribution or label, version)
        #: Why the plugin API it targets is not this core's, or None: then it is never built.
        self.incompatible: str | None = None

    def duplicate(self) -> DuplicateBackend:
        rival, rival_version = self.rivals[0]
        return DuplicateBackend(self.spec.name, self.distribution or "an in-process plugin", rival,
                                first_version=self.version, second_version=rival_version)


def _who(distribution: str, version: str | None) -> str:
    return f"{distribution} {version}" if version else distribution


class _ProbeRun:
    """One run of a backend's probe, in a daemon thread of its own so that a hung probe misses its
    deadline alone; a run still going when asked again is waited for, never started twice."""

    def __init__(self, target: Callable[[], ProbeResult]):
        import threading

        self.started = time.monotonic()
        self.done = threading.Event()
        self.result: ProbeResult | None = None
        self.timed_out = False
        self._target = target

    def start(self, name: str) -> None:
        import threading

        threading.Thread(target=self._run, name=f"ironaccel-probe-{name}", daemon=True).start()

    def _run(self) -> None:
        try:
            self.result = self._target()
        finally:
            self.done.set()

    def wait(self, timeout: float | None) -> bool:
        """Wait until `timeout` seconds after the run started; True once it has finished."""
        if timeout is None:
            return self.done.wait()
        return self.done.wait(max(0.0, self.started + timeout - time.monotonic()))


def probe_timeout() -> float | None:
    """The deadline of each probe in seconds (IRONACCEL_PROBE_TIMEOUT, default 10); None for no deadline.

    The default leaves room for cuInit on a multi-GPU host without persistence mode, which can
    take seconds.  Raises InvalidArgument for a value that is not a number of seconds.
    """
    raw = os.environ.get(ENV_PROBE_TIMEOUT, "").strip()
    if not raw:
        return DEFAULT_PROBE_TIMEOUT
    import math

    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < 0:
        raise InvalidArgument("ironaccel", "probe", detail=(
            f"{ENV_PROBE_TIMEOUT}={raw!r} is not a number of seconds (0 or inf: no deadline)"))
    return None if value == 0 or math.isinf(value) else value


def _check_name(name: object, op: str) -> str:
    if not isinstance(name, str):
        raise InvalidArgument("ironaccel", op, detail=(
            f"a backend name is a str such as 'cuda', got {type(name).__name__} {name!r}"))
    return name


def scan_entry_points(group: str, path: Iterable[str] | None = None) -> list[_EntryPoint]:
    """The entry points of `group` in every distribution on `path` (default sys.path).

    Reads `*.dist-info/entry_points.txt` directly and a distribution's METADATA
    only when it has the group: importlib.metadata parses every distribution's
    metadata with the email package, which costs more than the rest of
    `import ironaccel`.  The first distribution of a name on the path wins, as
    for imports.
    """
    found: list[_EntryPoint] = []
    seen: set[str] = set()
    header = f"[{group}]"
    for entry in sys.path if path is None else path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for folder in names:
            if not folder.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(entry, folder, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            if header not in text:
                continue
            name, version = _read_name_version(os.path.join(entry, folder), folder)
            key = _normalise_dist(name)
            if key in seen:
                continue
            seen.add(key)
            found.extend(_EntryPoint(n, v, name, version) for n, v in _section(text, header))
    return found


def _read_name_version(folder: str, basename: str) -> tuple[str, str | None]:
    name, _, rest = basename.rpartition(".")[0].partition("-")
    version: str | None = rest.split("-")[0] or None
    for meta in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, meta), encoding="utf-8") as f:
                for line in f:
                    if line.startswith("Name:"):
                        name = line[5:].strip()
                    elif line.startswith("Version:"):
                        version = line[8:].strip()
                    elif not line.strip():
                        break  # end of the headers
            break
        except OSError:
            continue
    return name, version


def _section(text: str, header: str) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            inside = line == header
        elif inside and "=" in line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            pairs.append((key.strip(), value.strip()))
    return pairs


def _split_env(var: str) -> list[str] | None:
    """A comma-separated env var as a list; None when unset."""
    raw = os.environ.get(var)
    if raw is None:
        return None
    return [part.strip() for part in raw.split(",") if part.strip()]


def _normalise_dist(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


class BackendRegistry:
    """Discovers backend plugins and hands out their backends, lazily and safely.

    Thread-safe: plugin loading runs under one lock, each backend's probe under
    its own, so a slow probe (a 400 MB PJRT plugin) never blocks another.
    """

    def __init__(self, group: str = GROUP, *, discover: bool = True):
        self.group = group
        self._lock = _thread.RLock()
        self._manager: pluggy.PluginManager | None = None
        self._entry_points: list[_EntryPoint] = []
        #: The entry points are still to be read, on first use (the process-wide registry, `_deferred`).
        self._undiscovered = False
        self._loaded_eps: set[tuple[str | None, str]] = set()
        self._loading: set[tuple[str | None, str]] = set()
        self._plugin_origin: dict[int, tuple[str | None, str | None, str]] = {}
        self._registered: dict[str, _Registered] = {}
        self._failures: list[PluginFailure] = []
        self._backends: dict[str, Any] = {}
        self._factory_errors: dict[str, PluginError] = {}
        self._probes: dict[str, ProbeResult] = {}
        self._probe_locks: dict[str, threading.Lock] = {}
        self._runs: dict[str, _ProbeRun] = {}
        self._warned: set[tuple[str, str]] = set()
        if discover:
            self._entry_points = self._discover()

    @classmethod
    def _deferred(cls, group: str = GROUP) -> BackendRegistry:
        """A registry that reads the entry points at its first use, not now: the process-wide one, so
        that importing ironaccel (for its errors, say) reads no metadata and does not import pluggy."""
        reg = cls(group, discover=False)
        reg._undiscovered = True
        return reg

    @property
    def _pm(self) -> pluggy.PluginManager:
        """The pluggy PluginManager, made (and pluggy imported) on first use."""
        manager = self._manager
        if manager is None:
            with self._lock:
                manager = self._manager
                if manager is None:
                    from ._manager import plugin_manager

                    manager = self._manager = plugin_manager()
        return manager

    # -- discovery and loading -------------------------------------------------

    def _discover(self) -> list[_EntryPoint]:
        return scan_entry_points(self.group)

    def _ensure_discovered(self) -> None:
        """Read the entry points now if this registry deferred it (`_deferred`); once."""
        if not self._undiscovered:
            return
        with self._lock:
            if self._undiscovered:
                self._entry_points.extend(self._discover())
                self._undiscovered = False

    def _allowed(self, distribution: str | None) -> bool:
        allow = _split_env(ENV_PLUGINS)
        if allow is None:
            return True
        return distribution is not None and _normalise_dist(distribution) in {_normalise_dist(a) for a in allow}

    def _ensure_loaded(self) -> None:
        self._ensure_discovered()
        pending = [
            ep
            for ep in self._entry_points
            if (ep.distribution, ep.value) not in self._loaded_eps and self._allowed(ep.distribution)
        ]
        if not pending:
            return
        with self._lock:
            for ep in pending:
                key = (ep.distribution, ep.value)
                if key in self._loaded_eps or key in self._loading:
                    continue  # done by another thread, or re-entered from a plugin's import
                self._loading.add(key)
                try:
                    self._load(ep)
                finally:
                    self._loading.discard(key)
                    self._loaded_eps.add(key)  # only now, so other threads wait on the lock until done

    def _load(self, ep: _EntryPoint) -> None:
        try:
            module = import_module(ep.value.split(":")[0])
            plugin = getattr(module, ep.value.split(":")[1]) if ":" in ep.value else module
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            self._fail(ep.distribution, ep.version, ep.label, "import", exc)
            return
        self._register(plugin, ep.distribution, ep.version, ep.label)

    def register(self, plugin: object, *, distribution: str | None = None, version: str | None = None) -> None:
        """Register an in-process plugin (a module or object with hookimpls).

        For tests and for backends defined in a script; installed distributions
        are found through their entry points instead.  Failures are recorded,
        as for entry-point plugins.
        """
        label = getattr(plugin, "__name__", type(plugin).__name__)
        with self._lock:
            self._register(plugin, distribution, version, label)

    def _register(self, plugin: object, dist: str | None, version: str | None, label: str) -> None:
        try:
            self._pm.register(plugin, name=f"{dist}:{label}:{id(plugin)}")
            for caller in self._pm.get_hookcallers(plugin) or ():
                if caller.spec is None:
                    raise PluginError(
                        f"hook {caller.name!r} has no specification (misspelled?)",
                        distribution=dist, version=version, stage="register",
                    )
        except Exception as exc:
            if self._pm.is_registered(plugin):
                self._pm.unregister(plugin)
            self._fail(dist, version, label, "register", exc)
            return
        self._plugin_origin[id(plugin)] = (dist, version, label)
        from .types import BackendSpec

        for spec in self._call_isolated(plugin, "ironaccel_backends", {}):
            if not isinstance(spec, BackendSpec):
                self._fail(dist, version, label, "hook", TypeError(f"ironaccel_backends returned {spec!r}"))
                continue
            self._add_spec(spec, dist, version, label)

    def _call_isolated(self, plugin: object, hook: str, kwargs: dict[str, Any]) -> list[Any]:
        """Call one plugin's implementation of `hook`, recording a failure instead of raising."""
        results: list[Any] = []
        for impl in getattr(self._pm.hook, hook).get_hookimpls():
            if impl.plugin is not plugin:
                continue
            try:
                value = impl.function(*[kwargs[arg] for arg in impl.argnames])
            except Exception as exc:
                dist, version, label = self._plugin_origin.get(id(plugin), (None, None, impl.plugin_name))
                self._fail(dist, version, label, "hook", exc, backend=kwargs.get("backend"))
                continue
            if value is not None:
                results.extend(value if isinstance(value, (list, tuple)) else [value])
        return results

    def _add_spec(self, spec: BackendSpec, dist: str | None, version: str | None, label: str) -> None:
        existing = self._registered.get(spec.name)
        if existing is None:
            reg = self._registered[spec.name] = _Registered(spec, dist, version)
            why = incompatible(spec.plugin_api)
            if why is not None:
                who = _who(dist, version) if dist else "an in-process plugin"
                reg.incompatible = f"{who} cannot be loaded: {why}"
                self._fail(dist, version, label, "contract", PluginError(
                    why, distribution=dist, version=version, stage="contract", backend=spec.name), backend=spec.name)
            return
        existing.rivals.append((dist or label, version))
        self._fail(dist, version, label, "register", existing.duplicate(), backend=spec.name)

    def _fail(
        self, dist: str | None, version: str | None, label: str, stage: str, exc: BaseException,
        backend: str | None = None,
    ) -> None:
        from .types import PluginFailure

        text = exc.detail if isinstance(exc, PluginError) else f"{type(exc).__name__}: {exc}"
        with self._lock:
            self._failures.append(PluginFailure(dist, version, label, stage, text, backend))

    # -- selection ------------------------------------------------------------

    def installed(self) -> list[str]:
        """Every backend name registered by an allowed plugin, ignoring selection."""
        self._ensure_loaded()
        return [
            name
            for name, reg in self._registered.items()
            if reg.distribution is None or self._allowed(reg.distribution)
        ]

    def names(self) -> list[str]:
        """Selected backend names, in order, honouring the environment.

        With IRONACCEL_BACKENDS set, exactly those names in that order (a
        name that is not installed is kept, so asking for it says what to
        install); otherwise every installed backend by priority then name.
        IRONACCEL_DISABLE removes names.
        """
        installed = self.installed()
        explicit = _split_env(ENV_BACKENDS)
        if explicit is not None:
            ordered = list(dict.fromkeys(explicit))
        else:
            ordered = sorted(installed, key=lambda n: (-self._registered[n].spec.priority, n))
        disabled = set(_split_env(ENV_DISABLE) or ())
        self._warn_unknown(ENV_BACKENDS, explicit or (), installed)
        self._warn_unknown(ENV_DISABLE, sorted(disabled - {"*"}), installed)
        if "*" in disabled:
            return []
        return [n for n in ordered if n not in disabled]

    def _warn_unknown(self, var: str, names: Iterable[str], installed: list[str]) -> None:
        """Warn (once per name) about a name in `var` that no installed or first-party backend has: a typo
        there would otherwise select or disable nothing, silently."""
        known = set(installed) | set(FIRST_PARTY)
        for name in names:
            if name in known or (var, name) in self._warned:
                continue
            self._warned.add((var, name))
            warnings.warn(f"{var} names {name!r}, which is neither an installed nor a first-party backend"
                          f"{_did_you_mean(name, known)} (known: {', '.join(sorted(known))})",
                          RuntimeWarning, stacklevel=4)

    def spec(self, name: str) -> BackendSpec:
        """The registered BackendSpec of `name` (NotAvailable if none)."""
        _check_name(name, "spec")
        self._ensure_loaded()
        reg = self._registered.get(name)
        if reg is None or name not in self.installed():
            raise self._not_installed(name)
        return reg.spec

    def distribution(self, name: str) -> tuple[str | None, str | None]:
        """(distribution, version) that provides backend `name`."""
        self.spec(name)
        reg = self._registered[name]
        return reg.distribution, reg.version

    def failures(self) -> list[PluginFailure]:
        """Every plugin failure recorded so far (import, hook, register, factory, probe)."""
        self._ensure_loaded()
        return list(self._failures)

    def library_dirs(self, backend: str) -> list[str]:
        """Folders contributed by the `ironaccel_library_dirs` hook for `backend`."""
        self._ensure_loaded()
        dirs: list[str] = []
        for plugin in self._pm.get_plugins():
            dirs.extend(str(d) for d in self._call_isolated(plugin, "ironaccel_library_dirs", {"backend": backend}))
        return dirs

    def _not_installed(self, name: str) -> NotAvailable:
        allow = os.environ.get(ENV_PLUGINS)
        reg = self._registered.get(name)
        if reg is not None:
            return NotAvailable(name, f"its distribution {reg.distribution} is not in {ENV_PLUGINS}={allow!r}",
                                fix=f"add {reg.distribution} to {ENV_PLUGINS} or unset it", named=True)
        hint = install_hint(name) or None
        known = ", ".join(sorted(self._registered)) or "none"
        excluded = sorted({ep.distribution or ep.label for ep in self._entry_points
                           if not self._allowed(ep.distribution)})
        provider = self._provider_hint(name)
        if provider in excluded:
            return NotAvailable(name, f"backend {name!r} comes from {provider}, which {ENV_PLUGINS}={allow!r} "
                                "leaves out", fix=f"add {provider} to {ENV_PLUGINS} or unset it", named=True)
        broken = [f for f in self._failures if f.stage in _LOAD_STAGES and f.backend is None]
        for failure in broken:
            if failure.distribution is not None and failure.distribution == provider:
                return NotAvailable(
                    name, f"the plugin of {_who(failure.distribution, failure.version)}, which provides backend "
                    f"{name!r}, failed at {failure.stage}: {failure.error}",
                    fix=f"reinstall or fix {failure.distribution} (`ironaccel --failures` lists every plugin failure)",
                    named=True)
        reason = f"no installed distribution provides backend {name!r} (installed: {known})"
        if not hint:
            reason += _did_you_mean(name, set(self._registered) | set(FIRST_PARTY))
        if excluded:
            reason += (f"; {ENV_PLUGINS}={allow!r} leaves out {', '.join(excluded)}, whose backends are not "
                       "known until they load")
            hint = hint or f"add the distribution that provides it to {ENV_PLUGINS} or unset it"
        if broken:
            names = ", ".join(dict.fromkeys(_who(f.distribution or f.entry_point, f.version) for f in broken))
            reason += f"; plugins that failed to load and may provide it: {names} (`ironaccel --failures`)"
        return NotAvailable(name, reason, fix=hint, named=True)

    def _provider_hint(self, name: str) -> str | None:
        """The distribution that would provide `name`: one whose entry point is called `name`, or the
        first-party `ironaccel-<name>`."""
        for ep in self._entry_points:
            if ep.name == name and ep.distribution:
                return ep.distribution
        for ep in self._entry_points:
            if ep.distribution and _normalise_dist(ep.distribution) == f"ironaccel-{name}":
                return ep.distribution
        return None

    def _check_selected(self, name: str) -> None:
        disabled = set(_split_env(ENV_DISABLE) or ())
        if name in disabled or "*" in disabled:
            raise NotAvailable(name, f"disabled by {ENV_DISABLE}={os.environ.get(ENV_DISABLE)}",
                               fix=f"remove it from {ENV_DISABLE}", named=True)
        explicit = _split_env(ENV_BACKENDS)
        if explicit is not None and name not in explicit:
            raise NotAvailable(name, f"not selected by {ENV_BACKENDS}={os.environ.get(ENV_BACKENDS)}",
                               fix=f"add it to {ENV_BACKENDS}", named=True)

    def _gate(self, name: str) -> None:
        """NotAvailable unless `name` is selected, installed and allowed, as the environment says now."""
        self._check_selected(name)
        self.spec(name)

    # -- backends and probes --------------------------------------------------

    def backend(self, name: str) -> Any:
        """The Backend object for `name`, built on first use (its factory imported now).

        Raises NotAvailable if the backend is not installed, disabled or not
        selected, DuplicateBackend if two distributions claim it, PluginError
        if its factory fails (recorded once, and raised again until ``refresh()``).
        """
        _check_name(name, "backend")
        self._gate(name)
        reg = self._registered[name]
        if reg.rivals:
            raise reg.duplicate()
        if reg.incompatible is not None:
            raise NotAvailable(name, reg.incompatible, fix=(
                f"install a release of {reg.distribution or 'the plugin'} written for plugin API "
                f"{PLUGIN_API.split('.')[0]}.x up to {PLUGIN_API}, or an ironaccel whose plugin API it targets"),
                named=True)
        backend = self._backends.get(name)
        if backend is not None:
            return backend
        with self._lock:
            backend = self._backends.get(name)
            if backend is not None:
                return backend
            error = self._factory_errors.get(name)
            if error is not None:
                raise error
            try:
                backend = _resolve(reg.spec.factory)()
            except Exception as exc:
                self._fail(reg.distribution, reg.version, f"{name} = {reg.spec.factory}", "factory", exc, name)
                error = PluginError(
                    f"the factory of backend {name!r} raised {type(exc).__name__}: {exc}",
                    distribution=reg.distribution, version=reg.version, stage="factory", backend=name,
                )
                self._factory_errors[name] = error
                raise error from exc
            self._backends[name] = backend
        return backend

    def probe(self, name: str) -> ProbeResult:
        """Probe `name` once, within IRONACCEL_PROBE_TIMEOUT, and cache the result; never raises for an
        unusable backend (InvalidArgument for a name that is not a str)."""
        from .types import ProbeResult

        unavailable = ProbeResult.from_error
        _check_name(name, "probe")
        try:
            self._gate(name)
        except NotAvailable as exc:
            return unavailable(exc)  # not cached: depends on the environment
        cached = self._probes.get(name)
        late = self._runs.get(name)
        if cached is not None and not (late is not None and late.done.is_set()):
            return cached
        try:
            backend = self.backend(name)
            timeout = probe_timeout()
        except NotAvailable as exc:
            return unavailable(exc)
        except PluginError as exc:
            spec = self._registered[name].spec
            fix = (f"reinstall {exc.distribution}: {spec.install}" if exc.stage == "factory" and spec.install
                   else self._report_fix(name))
            return unavailable(NotAvailable(name, exc.message, fix=fix))
        except InvalidArgument as exc:
            return unavailable(NotAvailable(name, exc.detail or exc.message,
                                            fix=f"set {ENV_PROBE_TIMEOUT} to a number of seconds, or unset it"))
        lock = self._probe_locks.setdefault(name, _thread.allocate_lock())
        with lock:
            cached = self._probes.get(name)
            run = self._runs.get(name)
            if cached is not None and not (run is not None and run.done.is_set()):
                return cached
            if run is None:
                run = _ProbeRun(lambda: self._run_probe(name, backend))
                if timeout is None:
                    run._run()
                else:
                    self._runs[name] = run
                    run.start(name)
            if run.wait(timeout):
                self._runs.pop(name, None)
                assert run.result is not None
                result = run.result
            else:
                assert timeout is not None
                result = unavailable(NotAvailable(
                    name, f"probe timed out after {timeout:g} s; it is not started again until it returns",
                    fix=f"raise {ENV_PROBE_TIMEOUT} (seconds; 0 for no deadline), or {self._report_fix(name)}"))
                if not run.timed_out:
                    run.timed_out = True
                    reg = self._registered[name]
                    self._fail(reg.distribution, reg.version, f"{name}.probe()", "probe",
                               TimeoutError(f"no answer within {timeout:g} s"), name)
            self._probes[name] = result
            return result

    def _run_probe(self, name: str, backend: Any) -> ProbeResult:
        from .types import ProbeResult

        try:
            result = backend.probe()
            if not isinstance(result, ProbeResult):
                raise TypeError(f"probe() returned {type(result).__name__}, not ProbeResult")
            return result
        except BaseException as exc:
            reg = self._registered[name]
            self._fail(reg.distribution, reg.version, f"{name}.probe()", "probe", exc, name)
            return ProbeResult(name, False, reason=f"the probe raised {type(exc).__name__}: {exc}",
                               fix=self._report_fix(name))

    def _report_fix(self, name: str) -> str:
        reg = self._registered.get(name)
        return f"report this to the maintainers of {reg.distribution if reg else 'its plugin'}"

    def available(self) -> list[str]:
        """Selected backends whose probe passes (probes each selected one)."""
        return [name for name in self.names() if self.probe(name).available]

    def _usable(self, name: str) -> Any:
        result = self.probe(name)
        if not result.available:
            raise NotAvailable(name, result.reason, fix=result.fix or None, searched=result.searched,
                               code=result.code, code_name=result.code_name, named=True)
        return self.backend(name)

    def devices(self, name: str | None = None) -> list[DeviceDescriptor]:
        """Devices of one backend (NotAvailable if it is unusable) or of every available one."""
        if name is not None:
            return list(self._usable(_check_name(name, "devices")).devices())
        found: list[DeviceDescriptor] = []
        for backend_name in self.available():
            try:
                found.extend(self.backend(backend_name).devices())
            except Exception:
                continue
        return found

    def open(self, name: str, ordinal: int = 0) -> Any:
        """Open device `ordinal` of backend `name`; NotAvailable says why if it can't."""
        return self._usable(_check_name(name, "open")).open(ordinal)

    def refresh(self, name: str | None = None) -> None:
        """Forget what was learned about `name` (or every backend) and probe again on the next call.

        Drops the cached probe results and factory failures (and their records
        in `failures()`), calls each built backend's own ``refresh()`` where it
        has one, and, for a full refresh, re-reads the entry points.  A probe
        still running past its deadline is not started again.
        """
        if name is not None:
            _check_name(name, "refresh")
        with self._lock:
            names = list(self._registered) if name is None else [name]
            for each in names:
                self._probes.pop(each, None)
                self._factory_errors.pop(each, None)
                run = self._runs.get(each)
                if run is not None and run.done.is_set():
                    del self._runs[each]
                elif run is not None:
                    run.timed_out = False  # its failure record goes below; the next probe() records it again
            self._failures = [f for f in self._failures
                              if not (f.stage in ("factory", "probe", "refresh") and f.backend in names)]
            backends = [(each, self._backends[each]) for each in names if each in self._backends]
            if name is None:
                known = {(ep.distribution, ep.value) for ep in self._entry_points}
                self._entry_points.extend(
                    ep for ep in self._discover() if (ep.distribution, ep.value) not in known
                )
                self._undiscovered = False
        for each, backend in backends:
            forget = getattr(backend, "refresh", None)
            if forget is None:
                continue
            try:
                forget()
            except Exception as exc:
                reg = self._registered[each]
                self._fail(reg.distribution, reg.version, f"{each}.refresh()", "refresh", exc, each)

    def survey(self, names: Iterable[str] | None = None, *, devices: bool = True) -> list[BackendReport]:
        """Probe and enumerate `names` (default: every selected backend)."""
        from .types import BackendReport

        reports = []
        for name in self.names() if names is None else _name_list(names, "survey"):
            try:
                spec = self.spec(name)
                dist, version = self.distribution(name)
            except NotAvailable:
                spec, dist, version = None, None, None
            result = self.probe(name)
            found: tuple[DeviceDescriptor, ...] = ()
            error = None
            if result.available and devices:
                try:
                    found = tuple(self.backend(name).devices())
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
            if spec is None:
                reports.append(BackendReport(name, None, None, "", result, found, error,
                                             install=install_hint(name)))
            else:
                reports.append(BackendReport(name, dist, version, spec.summary, result, found, error, spec.vendor,
                                             spec.kinds, spec.install))
        return reports


def _name_list(names: Iterable[str], op: str) -> list[str]:
    if isinstance(names, str):
        raise InvalidArgument("ironaccel", op, detail=f"names is a list of backend names, got the str {names!r}")
    try:
        return [_check_name(n, op) for n in names]
    except TypeError:
        raise InvalidArgument("ironaccel", op, detail=f"names is a list of backend names, got {names!r}") from None


def _resolve(factory: str | Callable[[], Any]) -> Callable[[], Any]:
    if callable(factory):
        return factory
    module, _, attr = factory.partition(":")
    target: Any = import_module(module)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


#: The process-wide registry used by the module-level functions of `ironaccel`; it reads the entry points
#: (and imports pluggy) on its first use, not when ironaccel is imported.
registry = BackendRegistry._deferred()

