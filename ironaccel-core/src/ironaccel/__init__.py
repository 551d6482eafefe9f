"""ironaccel: a low-level, hardware-agnostic interface over accelerator drivers.

    import ironaccel
    ironaccel.names()                 # selected backends, no probing
    ironaccel.probe("cuda")           # ProbeResult, cached, with the reason
    ironaccel.devices()               # DeviceDescriptors of every available backend
    dev = ironaccel.open("cuda", 0)   # a backend's device object

`PLUGIN_API` is the version of the plugin contract this core implements
(`ironaccel.contract` says what each version holds and the deprecation rule).

Importing this package reads no plugin metadata and imports neither pluggy nor
any plugin: the first call that needs the backends (`names()`, `probe()`,
`devices()`, `open()`, `registry.failures()`, ...) reads the entry points, and
no plugin module, vendor binding or vendor library is loaded until then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .contract import PLUGIN_API
from .errors import (
    ClosedError,
    CompileError,
    DriverError,
    DuplicateBackend,
    InvalidArgument,
    InvalidState,
    IronAccelError,
    NotAvailable,
    OutOfMemory,
    PluginError,
    Unsupported,
)
from .registry import BackendRegistry, registry

if TYPE_CHECKING:
    from .hookspecs import hookimpl
    from .types import (
        BackendReport,
        BackendSpec,
        CapabilityFlags,
        ComputeTier,
        DeviceDescriptor,
        DeviceKind,
        Dim3,
        DType,
        LaunchDims,
        PluginFailure,
        ProbeResult,
        Vendor,
    )

_FROM_TYPES = frozenset({
    "BackendReport", "BackendSpec", "CapabilityFlags", "ComputeTier", "DeviceDescriptor", "DeviceKind", "Dim3",
    "DType", "LaunchDims", "PluginFailure", "ProbeResult", "Vendor",
})


def __getattr__(name: str) -> Any:
    """Value types and `hookimpl` (pluggy's marker) load on first use, keeping `import ironaccel` cheap."""
    if name in _FROM_TYPES:
        from . import types

        value = getattr(types, name)
        globals()[name] = value
        return value
    if name in ("hookimpl", "hookspecs"):  # `ironaccel.hookspecs` resolves without an import, as it always has
        from .hookspecs import hookimpl  # binds ironaccel.hookspecs too (`from . import` would recurse here)

        globals()["hookimpl"] = hookimpl
        return hookimpl if name == "hookimpl" else globals()["hookspecs"]
    raise AttributeError(f"module 'ironaccel' has no attribute {name!r}")


__version__ = "0.2.0"

__all__ = [
    "__version__",
    "PLUGIN_API",
    "registry",
    "BackendRegistry",
    "BackendReport",
    "hookimpl",
    "names",
    "probe",
    "backend",
    "devices",
    "open",
    "survey",
    # types
    "BackendSpec",
    "CapabilityFlags",
    "ComputeTier",
    "DeviceDescriptor",
    "DeviceKind",
    "Dim3",
    "DType",
    "LaunchDims",
    "PluginFailure",
    "ProbeResult",
    "Vendor",
    # errors
    "IronAccelError",
    "NotAvailable",
    "PluginError",
    "DuplicateBackend",
    "DriverError",
    "OutOfMemory",
    "InvalidArgument",
    "InvalidState",
    "ClosedError",
    "CompileError",
    "Unsupported",
]


def names() -> list[str]:
    """Selected backend names, in order (see `BackendRegistry.names`)."""
    return registry.names()


def probe(name: str) -> ProbeResult:
    """Probe one backend, once; the cached result says why it is unusable."""
    return registry.probe(name)


def backend(name: str) -> Any:
    """The Backend object of `name` (built on first use)."""
    return registry.backend(name)


def devices(name: str | None = None) -> list[DeviceDescriptor]:
    """Devices of backend `name`, or of every available backend."""
    return registry.devices(name)


def open(name: str, ordinal: int = 0) -> Any:
    """Open device `ordinal` of backend `name`."""
    return registry.open(name, ordinal)


def survey(names: list[str] | None = None, *, devices: bool = True) -> list[BackendReport]:
    """Probe and enumerate backends, for display (what the CLI prints)."""
    return registry.survey(names, devices=devices)
