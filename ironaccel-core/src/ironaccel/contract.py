"""The plugin contract, its version `PLUGIN_API`, and the rules for changing it.

The plugin-facing surface is one contract: the hook specifications
(`ironaccel.hookspecs`), `BackendSpec` and the value types a backend returns,
the errors, the probing helpers (`ironaccel.probing`), the compute kit
(`ironaccel.compute`), the protocols, and the testing kit (the conformance
classes, the pytest plugin, `cbuild`).  Its versions:

* **1.0** -- the original kit: the two hooks, `BackendSpec`, `load_library`,
  `import_binding`, `require_platform`, `distribution_version`, `unavailable`,
  `probe_guard`, `BackendConformance` and `ComputeDeviceConformance` (round
  trips, the generic routine, `write`, bad sizes and counts).
* **1.1** -- the compute kit (`ComputeDeviceBase`, handles, checks, shaders,
  `errors.Timeout`), the probe pattern (`ProbedBackend`, `ProbeFacts`,
  `check_ordinal`, `loaded_library`), `load_library(symbols=)`,
  `testing.cbuild`, and the conformance tests added with the kit (N-D uploads
  flattened in C order, raw `download(out=)`, argument kinds, waits and
  timeouts, threads, fork, element types).  1.1 removed `probe_guard` without
  a deprecation, which broke a third party; 1.2 restores it, deprecated.
* **1.2** -- the execution model (`compute/model.py`, `compute/execution.py`,
  `testing/execution.py`: queues, fences, batches, timestamps, typed params,
  constants, memory kinds, DLPack, interop), `BackendSpec.plugin_api`, the
  conformance class attribute `plugin_api`, this module; source objects
  (`compute/sources.py`, `Translation`: Slang and other languages no device
  compiles, translated per device by their package).

Rules: a name listed in `SINCE` is never removed or changed incompatibly
without first warning (`DeprecationWarning`, via `deprecated`) for at least one
minor release; the entries of `DEPRECATED` say since when and what replaces
them.  A plugin states the contract it targets with
``BackendSpec(plugin_api="1.1")``; core loads it when the major version is the
same and the minor is not newer than `PLUGIN_API` (`incompatible` says why
not).  Standard library only: every module of ironaccel may import this one.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["PLUGIN_API", "SINCE", "DEPRECATED", "since", "since_of", "deprecated", "parse", "incompatible",
           "is_at_least"]

#: The version of the plugin contract this ironaccel implements.
PLUGIN_API = "1.2"

_K = "ironaccel.compute."
_EXECUTION = ("FEATURES", "MEMORY_KINDS", "Queue", "Fence", "CommandBatch", "Command", "Timings", "ExternalMemory",
              "ExternalFence", "close_duplicate", "ParamBlock", "Field", "Scalar", "Vector", "Array", "Struct",
              "ConstantInfo")

#: Every documented name of the contract and the version it appeared in (tests/test_contract.py keeps this
#: table equal to the modules' public names).
SINCE: dict[str, str] = {
    "ironaccel.hookspecs.hookimpl": "1.0",
    "ironaccel.hookspecs.ironaccel_backends": "1.0",
    "ironaccel.hookspecs.ironaccel_library_dirs": "1.0",
    **{f"ironaccel.types.{n}": "1.0" for n in (
        "Vendor", "DeviceKind", "ComputeTier", "CapabilityFlags", "DType", "Dim3", "LaunchDims", "BackendSpec",
        "ProbeResult", "DeviceDescriptor", "PluginFailure", "BackendReport")},
    "ironaccel.types.BackendSpec.plugin_api": "1.2",
    **{f"ironaccel.errors.{n}": "1.0" for n in (
        "IronAccelError", "NotAvailable", "PluginError", "DuplicateBackend", "DriverError", "OutOfMemory",
        "InvalidArgument", "InvalidState", "ClosedError", "CompileError", "Unsupported")},
    "ironaccel.errors.Timeout": "1.1",
    **{f"ironaccel.protocols.{n}": "1.0" for n in (
        "Backend", "Device", "Stream", "Event", "Buffer", "ComputeDevice", "ComputeBuffer", "Pipeline", "Submission")},
    **{f"ironaccel.protocols.{n}": "1.2" for n in ("ComputeQueue", "ComputeFence", "ComputeBatch")},
    **{f"ironaccel.probing.{n}": "1.0" for n in (
        "LoadedLibrary", "load_library", "import_binding", "require_platform", "distribution_version",
        "unavailable", "probe_guard")},
    "ironaccel.probing.load_library.symbols": "1.1",
    **{f"ironaccel.probing.{n}": "1.1" for n in ("ProbedBackend", "ProbeFacts", "check_ordinal", "loaded_library")},
    **{_K + n: "1.1" for n in (
        "ComputeDeviceBase", "flat_bytes", "BufferHandle", "PipelineHandle", "Program", "ProgramCache", "Submission",
        "wait_for", "evict_unused", "WAIT_SLICE", "buffer_list", "check_out", "count", "element_count",
        "element_type", "entry_name", "host_array", "numpy_dtype", "pack_params", "timeout_seconds",
        "workgroup_size", "workgroups", "Interface", "BindingInfo", "StorageBinding", "check_bindings",
        "glsl_interface", "source_text", "wgsl_interface", "ensure_runtime_dir", "fork_error", "generation")},
    **{_K + n: "1.2" for n in _EXECUTION},
    _K + "Translation": "1.2",
    "ironaccel.testing.conformance.BackendConformance": "1.0",
    "ironaccel.testing.conformance.ComputeDeviceConformance": "1.0",
    "ironaccel.testing.conformance.scale_offset": "1.0",
    "ironaccel.testing.conformance.ComputeDeviceConformance.plugin_api": "1.2",
    "ironaccel.testing.execution.ExecutionConformance": "1.2",
    "ironaccel.testing.pytest_plugin.require": "1.0",
    "ironaccel.testing.pytest_plugin.require_backend": "1.0",
    **{f"ironaccel.testing.cbuild.{n}": "1.1" for n in (
        "compiler", "missing", "build", "shared_library", "executable", "BuildError")},
    **{f"ironaccel.contract.{n}": "1.2" for n in __all__},
}

#: Deprecated names: (the contract version that deprecated it, what to use instead).  Each warns with a
#: DeprecationWarning when used and stays for at least one more minor release.
DEPRECATED: dict[str, tuple[str, str]] = {
    "ironaccel.probing.probe_guard": (
        "1.2", "subclass ironaccel.probing.ProbedBackend (probe steps in _probe(facts)), or catch NotAvailable and "
               "return ironaccel.probing.unavailable(exc)"),
}

_VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
_F = TypeVar("_F", bound=Callable[..., Any])
_T = TypeVar("_T")


def parse(version: object) -> tuple[int, int]:
    """``"1.2"`` as ``(1, 2)``; ValueError for anything that is not MAJOR.MINOR."""
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise ValueError(f"a plugin API version is 'MAJOR.MINOR' such as {PLUGIN_API!r}, got {version!r}")
    major, minor = version.split(".")
    return int(major), int(minor)


def is_at_least(version: str, minimum: str) -> bool:
    """True when contract `version` includes what `minimum` introduced."""
    return parse(version) >= parse(minimum)


def incompatible(target: str | None, implemented: str = PLUGIN_API) -> str | None:
    """Why a plugin targeting contract `target` cannot load under `implemented`; None when it can.

    None (a plugin that does not say) loads: it was written before plugins said.
    """
    if target is None:
        return None
    want, have = parse(target), parse(implemented)
    if want[0] != have[0]:
        return (f"it targets plugin API {target} and this ironaccel implements {implemented}: the major version "
                "differs")
    if want[1] > have[1]:
        return f"it targets plugin API {target}, newer than the {implemented} this ironaccel implements"
    return None


def since(version: str) -> Callable[[_T], _T]:
    """Mark a function, class or conformance test with the contract version that introduced it."""
    parse(version)

    def mark(obj: _T) -> _T:
        obj.__plugin_api_since__ = version  # type: ignore[attr-defined]
        return obj

    return mark


def since_of(obj: object, default: str = "1.0") -> str:
    """The version `obj` is marked with (by `since`), else `default`."""
    value = getattr(obj, "__plugin_api_since__", None)
    return value if isinstance(value, str) else default


def deprecated(name: str) -> Callable[[_F], _F]:
    """Wrap a function listed in `DEPRECATED` so that each call warns (DeprecationWarning) with its replacement."""
    version, instead = DEPRECATED[name]

    def wrap(fn: _F) -> _F:
        message = (f"{name} is deprecated since plugin API {version} and will be removed in a later minor release;"
                   f" instead, {instead}")

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(message, DeprecationWarning, stacklevel=2)
            return fn(*args, **kwargs)

        call.__plugin_api_deprecated__ = version  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return wrap
