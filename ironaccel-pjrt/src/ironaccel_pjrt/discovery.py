"""Find installed PJRT plugins without loading them.

Places looked at, in order (a file found twice is listed once, first source wins):

1. ``IRONACCEL_PJRT_PLUGIN=/path/a.so:/path/b.so`` -- explicit plugin files (or folders holding them);
2. the ``jax_plugins`` and ``xla_plugins`` entry-point groups (JAX's own mechanism;
   ``jax-cuda13-pjrt`` registers ``xla_cuda13``, ``xla-cpu-pjrt`` registers ``xla_cpu_pjrt``);
3. the ``jax_plugins`` and ``xla_plugins`` namespace packages, folder by folder;
4. ``libtpu`` (the package folder, or ``TPU_LIBRARY_PATH``).

Nothing is imported or dlopened here: modules are located through distribution
metadata and ``importlib`` specs of top-level names only, and a plugin is a
``.so`` file in the module's folder.  Loading happens in `api.load_api`.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

__all__ = ["ENV_PLUGIN", "PluginLocation", "discover", "searched_places"]

ENV_PLUGIN = "IRONACCEL_PJRT_PLUGIN"
ENTRY_POINT_GROUPS = ("jax_plugins", "xla_plugins")
NAMESPACES = ("jax_plugins", "xla_plugins")


@dataclass(frozen=True)
class PluginLocation:
    """One plugin file: `name` (e.g. "xla_cuda13"), `path`, and `source` (how it was found)."""

    name: str
    path: str
    source: str
    distribution: str | None = None

    @property
    def platform_hint(self) -> str:
        """A guess at the platform from the name, before any client exists: cuda, rocm, tpu or cpu."""
        text = f"{self.name} {os.path.basename(self.path)}".lower()
        for platform in ("cuda", "rocm", "tpu"):
            if platform in text:
                return platform
        return "cpu" if "cpu" in text else "unknown"


def _plugin_files(folder: Path) -> list[Path]:
    """The plugin .so files of a plugin module's folder (those named like a plugin first)."""
    try:
        files = sorted(p for p in folder.iterdir() if p.suffix == ".so" and p.is_file())
    except OSError:
        return []
    named = [p for p in files if any(k in p.name.lower() for k in ("pjrt", "plugin", "libtpu"))]
    return named or files


def _module_folder(module: str, dist: metadata.Distribution | None) -> Path | None:
    """The folder of `module` (dotted) without importing it or its parents."""
    relative = Path(*module.split("."))
    if dist is not None:
        located = Path(str(dist.locate_file(relative)))
        if located.is_dir():
            return located
    top, _, rest = module.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    roots = list(spec.submodule_search_locations or [])
    if not roots and spec.origin:
        roots = [os.path.dirname(spec.origin)]
    for root in roots:
        folder = Path(root, *rest.split(".")) if rest else Path(root)
        if folder.is_dir():
            return folder
    return None


def _from_env() -> list[PluginLocation]:
    found = []
    for entry in os.environ.get(ENV_PLUGIN, "").split(os.pathsep):
        if not entry:
            continue
        path = Path(entry).expanduser()
        files = _plugin_files(path) if path.is_dir() else [path]
        for f in files:
            # A missing file is still listed: loading it reports "not found" with the path.
            found.append(PluginLocation(f.stem, str(f), f"${ENV_PLUGIN}"))
    return found


def _from_entry_points() -> list[PluginLocation]:
    found = []
    for group in ENTRY_POINT_GROUPS:
        for ep in metadata.entry_points(group=group):
            dist = getattr(ep, "dist", None)
            folder = _module_folder(ep.value.partition(":")[0], dist)
            if folder is None:
                continue
            dist_name = dist.metadata["Name"] if dist is not None else None
            for f in _plugin_files(folder):
                found.append(PluginLocation(ep.name, str(f), f"entry point {group}:{ep.name}", dist_name))
    return found


def _from_namespaces() -> list[PluginLocation]:
    found = []
    for namespace in NAMESPACES:
        try:
            spec = importlib.util.find_spec(namespace)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        for root in spec.submodule_search_locations or []:
            try:
                children = sorted(Path(root).iterdir())
            except OSError:
                continue
            for child in children:
                if child.is_dir() and not child.name.startswith(("_", ".")):
                    for f in _plugin_files(child):
                        found.append(PluginLocation(child.name, str(f), f"namespace package {namespace}"))
    return found


def _from_libtpu() -> list[PluginLocation]:
    explicit = os.environ.get("TPU_LIBRARY_PATH")
    if explicit:
        return [PluginLocation("libtpu", explicit, "$TPU_LIBRARY_PATH")]
    folder = _module_folder("libtpu", None)
    if folder is None:
        return []
    return [PluginLocation("libtpu", str(f), "package libtpu") for f in folder.glob("libtpu*.so")]


def discover() -> list[PluginLocation]:
    """Every PJRT plugin file installed or named, deduplicated by real path; loads nothing."""
    seen: set[str] = set()
    plugins: list[PluginLocation] = []
    for plugin in _from_env() + _from_entry_points() + _from_namespaces() + _from_libtpu():
        key = os.path.realpath(plugin.path)
        if key not in seen:
            seen.add(key)
            plugins.append(plugin)
    return plugins


def searched_places() -> list[str]:
    """What `discover` looks at, for the message when it finds nothing."""
    return [
        f"${ENV_PLUGIN} ({os.environ.get(ENV_PLUGIN) or 'unset'})",
        *(f"entry points {g}" for g in ENTRY_POINT_GROUPS),
        *(f"namespace package {n}" for n in NAMESPACES),
        "package libtpu / $TPU_LIBRARY_PATH",
    ]
