"""Plain value types shared by every backend.

All are small, immutable and cheap to build: hooks hand them over, probes return
them, the CLI prints them.  None of them touches hardware.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Union

from .contract import parse as parse_plugin_api

if TYPE_CHECKING:
    import numpy as np

    from .errors import NotAvailable

__all__ = [
    "Vendor",
    "DeviceKind",
    "ComputeTier",
    "CapabilityFlags",
    "DType",
    "Dim3",
    "LaunchDims",
    "BackendSpec",
    "ProbeResult",
    "DeviceDescriptor",
    "PluginFailure",
    "BackendReport",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class Vendor(str, enum.Enum):
    """Who makes the device (or the software implementation of it)."""

    NVIDIA = "nvidia"
    AMD = "amd"
    INTEL = "intel"
    APPLE = "apple"
    QUALCOMM = "qualcomm"
    GOOGLE = "google"
    AWS = "aws"
    ARM = "arm"
    IMAGINATION = "imagination"
    MICROSOFT = "microsoft"
    MESA = "mesa"
    UNKNOWN = "unknown"

    @classmethod
    def from_pci_id(cls, vendor_id: int) -> Vendor:
        """Map a PCI (or Khronos) vendor id, as Vulkan and WebGPU report it."""
        return _PCI_VENDORS.get(vendor_id, cls.UNKNOWN)


_PCI_VENDORS = {
    0x10DE: Vendor.NVIDIA,
    0x1002: Vendor.AMD,
    0x1022: Vendor.AMD,
    0x8086: Vendor.INTEL,
    0x106B: Vendor.APPLE,
    0x5143: Vendor.QUALCOMM,
    0x1AE0: Vendor.GOOGLE,
    0x1D0F: Vendor.AWS,
    0x13B5: Vendor.ARM,
    0x1010: Vendor.IMAGINATION,
    0x1414: Vendor.MICROSOFT,
    0x10005: Vendor.MESA,  # VK_VENDOR_ID_MESA: lavapipe, llvmpipe
}


class DeviceKind(str, enum.Enum):
    """What sort of processor a device is."""

    GPU = "gpu"
    NPU = "npu"
    TPU = "tpu"
    CPU = "cpu"


class ComputeTier(enum.IntEnum):
    """Coarse class of a device, for dispatchers that pick among several.

    SOFTWARE: a CPU implementation (lavapipe, llvmpipe, a PJRT CPU client).
    MOBILE: phone and embedded NPUs and GPUs.  CONSUMER: integrated and
    desktop parts.  WORKSTATION: professional cards.  DATACENTER: H100/H200,
    MI300, TPU, Trainium class parts.
    """

    SOFTWARE = 0
    MOBILE = 1
    CONSUMER = 2
    WORKSTATION = 3
    DATACENTER = 4


class CapabilityFlags(enum.Flag):
    """What a device can do, translated from each vendor's own tables."""

    NONE = 0
    FP16 = enum.auto()
    BF16 = enum.auto()
    FP64 = enum.auto()
    INT8 = enum.auto()
    MATRIX_UNITS = enum.auto()  # tensor cores, matrix cores, MXUs
    UNIFIED_ADDRESSING = enum.auto()
    MANAGED_MEMORY = enum.auto()
    HOST_MAPPED_MEMORY = enum.auto()
    MEMORY_POOLS = enum.auto()  # stream-ordered allocation
    PEER_ACCESS = enum.auto()
    GRAPHS = enum.auto()
    COOPERATIVE_LAUNCH = enum.auto()
    SUBGROUPS = enum.auto()
    TIMESTAMPS = enum.auto()
    RUNTIME_COMPILE = enum.auto()
    ASYNC_COPY = enum.auto()  # copy engines that overlap with compute

    def names(self) -> list[str]:
        """The set flags as lower-case names, for printing and JSON."""
        return [f.name.lower() for f in CapabilityFlags if f.value and f in self and f.name]


class DType(str, enum.Enum):
    """Element types, with their numpy mapping.

    `DType.of(x)` accepts a DType, a name ("float32"), a numpy dtype or a
    numpy scalar type.  bfloat16 maps to numpy through `ml_dtypes` when that
    package is installed.
    """

    BOOL = "bool"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    UINT8 = "uint8"
    UINT16 = "uint16"
    UINT32 = "uint32"
    UINT64 = "uint64"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    COMPLEX64 = "complex64"
    COMPLEX128 = "complex128"

    @property
    def itemsize(self) -> int:
        """Bytes per element of this type."""
        return _ITEMSIZE[self]

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype; raises TypeError for bfloat16 without ml_dtypes."""
        import numpy as np

        if self is DType.BFLOAT16:
            try:
                import ml_dtypes
            except ImportError:
                raise TypeError("bfloat16 has no numpy dtype; pip install ml_dtypes") from None
            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(self.value)

    @classmethod
    def of(cls, value: DTypeLike) -> DType:
        """Normalise anything dtype-like to a DType; TypeError if unknown.

        Non-native byte orders are refused: devices read native-endian bytes.
        Results are memoised, so this is a dict lookup on hot paths.
        """
        if isinstance(value, DType):
            return value
        try:
            return _DTYPE_CACHE[value]
        except (KeyError, TypeError):  # TypeError: an unhashable value
            pass
        found: DType | None = None
        if isinstance(value, str):
            found = cls._value2member_map_.get(value.lower())  # type: ignore[assignment]
        else:
            import numpy as np

            try:
                dt = np.dtype(value)  # type: ignore[arg-type]
            except (TypeError, ValueError):  # ValueError: a malformed spec, such as ("f4", -1)
                dt = None
            if dt is not None and not dt.isnative:
                raise TypeError(f"dtype {dt} is not in native byte order; convert with .astype(dt.newbyteorder('='))")
            if dt is not None:
                found = cls._value2member_map_.get(dt.name)  # type: ignore[assignment]
        if found is None:
            raise TypeError(f"unsupported dtype {value!r}; expected one of {[d.value for d in cls]}")
        try:
            _DTYPE_CACHE[value] = found
        except TypeError:
            pass
        return found


_DTYPE_CACHE: dict[Any, DType] = {}

DTypeLike = Union[DType, str, "np.dtype", type]

_ITEMSIZE = {
    DType.BOOL: 1,
    DType.INT8: 1,
    DType.INT16: 2,
    DType.INT32: 4,
    DType.INT64: 8,
    DType.UINT8: 1,
    DType.UINT16: 2,
    DType.UINT32: 4,
    DType.UINT64: 8,
    DType.FLOAT16: 2,
    DType.BFLOAT16: 2,
    DType.FLOAT32: 4,
    DType.FLOAT64: 8,
    DType.COMPLEX64: 8,
    DType.COMPLEX128: 16,
}


@dataclass(frozen=True, slots=True)
class Dim3:
    """A 3-D extent (grid or block); build with `Dim3.of(n)` or `Dim3.of((x, y, z))`."""

    x: int = 1
    y: int = 1
    z: int = 1

    @classmethod
    def of(cls, value: int | tuple[int, ...] | Dim3) -> Dim3:
        """A Dim3 from an int, a 1-3 tuple or a Dim3 (missing dimensions are 1); InvalidArgument for anything else."""
        if isinstance(value, Dim3):
            return value
        raw = tuple(value) if isinstance(value, (tuple, list)) else (value,)
        try:
            if isinstance(value, bool) or not 1 <= len(raw) <= 3 or any(isinstance(p, bool) for p in raw):
                raise TypeError
            parts = tuple(operator.index(p) for p in raw)
        except TypeError:
            raise ValueError(f"a dimension is 1 to 3 positive ints, got {value!r}") from None
        if min(parts) < 1:
            raise ValueError(f"extents must be positive integers, got {value!r}")
        return cls(*parts)

    @property
    def total(self) -> int:
        """The number of elements the three dimensions span (x * y * z)."""
        return self.x * self.y * self.z

    def __iter__(self):
        return iter((self.x, self.y, self.z))


@dataclass(frozen=True, slots=True)
class LaunchDims:
    """Grid (in blocks/workgroups) and block (threads per block) of a launch."""

    grid: Dim3
    block: Dim3 = Dim3()

    @classmethod
    def of(cls, grid: int | tuple[int, ...] | Dim3, block: int | tuple[int, ...] | Dim3 = 1) -> LaunchDims:
        """Launch dimensions from a grid and a block, each anything `Dim3.of` takes."""
        return cls(Dim3.of(grid), Dim3.of(block))


@dataclass(frozen=True, slots=True)
class BackendSpec:
    """What a plugin hands over for one backend: names and a lazy factory.

    `factory` is either a "module:attribute" string or a zero-argument
    callable; it is only resolved when the backend is first asked for, so
    registering costs nothing.  The factory returns an object implementing
    `ironaccel.protocols.Backend`.
    """

    name: str
    factory: str | Callable[[], Any]
    summary: str = ""
    vendor: Vendor = Vendor.UNKNOWN
    kinds: tuple[DeviceKind, ...] = (DeviceKind.GPU,)
    install: str = ""  # e.g. "pip install ironaccel-cuda"
    priority: int = 0  # higher first, when nothing else orders backends
    #: The plugin contract version the plugin was written against ("1.1"; `ironaccel.PLUGIN_API` is core's),
    #: since 1.2.  None: unstated, loaded as compatible.  The registry refuses, and reports, a plugin whose
    #: major version differs from core's or whose minor is newer.
    plugin_api: str | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"backend names are lower-case identifiers, got {self.name!r}")
        if self.plugin_api is not None:
            parse_plugin_api(self.plugin_api)
        if not (callable(self.factory) or (isinstance(self.factory, str) and ":" in self.factory)):
            raise ValueError(f"factory must be 'module:attr' or a callable, got {self.factory!r}")


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """The outcome of probing one backend, cached by the registry.

    When `available` is False, `reason` says exactly why and `fix` what to do.
    """

    backend: str
    available: bool
    reason: str = ""
    fix: str = ""
    driver_version: str | None = None
    runtime_version: str | None = None
    binding_version: str | None = None
    library_path: str | None = None
    device_count: int = 0
    code: int | None = None
    code_name: str | None = None
    searched: tuple[str, ...] = ()
    extras: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    @classmethod
    def from_error(cls, exc: NotAvailable, **extra: Any) -> ProbeResult:
        """The unavailable ProbeResult that a NotAvailable describes (`extra`: more fields)."""
        return cls(backend=exc.backend or "?", available=False, reason=exc.reason, fix=exc.fix or "", code=exc.code,
                   code_name=exc.code_name, searched=exc.searched, **extra)

    def to_dict(self) -> dict[str, Any]:
        """The probe's outcome as JSON-able plain data, for `ironaccel list --json`."""
        return {
            "backend": self.backend,
            "available": self.available,
            "reason": self.reason,
            "fix": self.fix,
            "driver_version": self.driver_version,
            "runtime_version": self.runtime_version,
            "binding_version": self.binding_version,
            "library_path": self.library_path,
            "device_count": self.device_count,
            "code": self.code,
            "code_name": self.code_name,
            "searched": list(self.searched),
            "extras": _jsonable(self.extras),
        }


@dataclass(frozen=True, slots=True)
class DeviceDescriptor:
    """One device as a dispatcher sees it, whatever the backend."""

    backend: str
    ordinal: int
    name: str
    vendor: Vendor = Vendor.UNKNOWN
    kind: DeviceKind = DeviceKind.GPU
    memory_bytes: int = 0
    compute_tier: ComputeTier = ComputeTier.CONSUMER
    capabilities: CapabilityFlags = CapabilityFlags.NONE
    extras: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __repr__(self) -> str:
        """One short line: backend, ordinal, name and the key facts; `to_dict()` has everything."""
        memory = f"{self.memory_bytes / 2**30:.1f} GiB" if self.memory_bytes else "memory unknown"
        caps = len(self.capabilities.names())
        return (f"<DeviceDescriptor {self.backend}:{self.ordinal} {self.name!r} {self.kind.value} "
                f"{self.vendor.value} {memory} {self.compute_tier.name.lower()}, {caps} capabilities, "
                f"{len(self.extras)} extras>")

    def to_dict(self) -> dict[str, Any]:
        """The descriptor as JSON-able plain data (the vendor as its string value)."""
        return {
            "backend": self.backend,
            "ordinal": self.ordinal,
            "name": self.name,
            "vendor": self.vendor.value,
            "kind": self.kind.value,
            "memory_bytes": self.memory_bytes,
            "compute_tier": self.compute_tier.name.lower(),
            "capabilities": self.capabilities.names(),
            "extras": _jsonable(self.extras),
        }


@dataclass(frozen=True, slots=True)
class PluginFailure:
    """A plugin that could not be imported, registered or probed."""

    distribution: str | None
    version: str | None
    entry_point: str
    stage: str  # "import", "hook", "register", "contract", "factory", "probe", "refresh"
    error: str
    backend: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The failure as JSON-able plain data, for `ironaccel list --json`."""
        return {
            "distribution": self.distribution,
            "version": self.version,
            "entry_point": self.entry_point,
            "stage": self.stage,
            "error": self.error,
            "backend": self.backend,
        }


@dataclass(frozen=True, slots=True)
class BackendReport:
    """One backend as the survey shows it.

    `vendor`, `kinds` and `install` come from the plugin's BackendSpec (for a
    first-party backend that is not installed, `install` says how to get it),
    so a dispatcher can tell what a backend could offer without probing it.
    """

    name: str
    distribution: str | None
    version: str | None
    summary: str
    probe: ProbeResult
    devices: tuple[DeviceDescriptor, ...] = ()
    error: str | None = None  # enumeration failed although the probe passed
    vendor: Vendor | None = None
    kinds: tuple[DeviceKind, ...] = ()
    install: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-able plain data (what `ironaccel list --json` prints)."""
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "summary": self.summary,
            "vendor": self.vendor.value if self.vendor else None,
            "kinds": [k.value for k in self.kinds],
            "install": self.install,
            "probe": self.probe.to_dict(),
            "devices": [d.to_dict() for d in self.devices],
            "error": self.error,
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
