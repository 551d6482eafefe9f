"""The Level Zero loader (libze_loader), found and declared through ctypes.

Searched in order: ``IRONACCEL_LEVELZERO_LIBRARY`` (a file, or folders),
the oneAPI folders, the ``ironaccel_library_dirs`` hook, LD_LIBRARY_PATH, the
system folders, then the dynamic loader; names ``libze_loader.so.1`` and
``libze_loader.so``.  Every call goes through `check`, which turns a
ze_result_t into a typed error naming the function and the result.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ironaccel.errors import DriverError, InvalidArgument, OutOfMemory
from ironaccel.probing import load_library

from . import structs
from .results import INVALID_ARGUMENT, OUT_OF_MEMORY, result_name

BACKEND = "levelzero"
ENV_LIBRARY = "IRONACCEL_LEVELZERO_LIBRARY"
NAMES = ("libze_loader.so.1", "libze_loader.so")
EXTRA_DIRS = ("/opt/intel/oneapi/redist/lib", "/opt/intel/oneapi/compiler/latest/lib")
FIX = f"install the Level Zero loader (apt-get install libze1), or point {ENV_LIBRARY} at libze_loader"
FIX_DRIVER = (
    "install a Level Zero driver for the device: Intel's compute runtime (intel-level-zero-gpu, "
    "libze-intel-gpu1) for GPUs, or the Intel NPU driver"
)

_P = ctypes.POINTER
_HANDLE = ctypes.c_void_p
_SIGNATURES: dict[str, list[type]] = {
    "zeInit": [ctypes.c_uint32],
    "zeDriverGet": [_P(ctypes.c_uint32), _P(_HANDLE)],
    "zeDriverGetApiVersion": [_HANDLE, _P(ctypes.c_uint32)],
    "zeDriverGetProperties": [_HANDLE, _P(structs.DriverProperties)],
    "zeDeviceGet": [_HANDLE, _P(ctypes.c_uint32), _P(_HANDLE)],
    "zeDeviceGetProperties": [_HANDLE, _P(structs.DeviceProperties)],
    "zeDeviceGetComputeProperties": [_HANDLE, _P(structs.DeviceComputeProperties)],
    "zeDeviceGetModuleProperties": [_HANDLE, _P(structs.DeviceModuleProperties)],
    "zeDeviceGetMemoryProperties": [_HANDLE, _P(ctypes.c_uint32), _P(structs.DeviceMemoryProperties)],
    "zeDeviceGetCommandQueueGroupProperties": [_HANDLE, _P(ctypes.c_uint32), _P(structs.CommandQueueGroupProperties)],
}


@dataclass(frozen=True)
class Loader:
    """libze_loader with its functions declared."""

    lib: ctypes.CDLL
    path: str
    searched: tuple[str, ...]

    def version(self) -> str | None:
        """The loader's own version (zelLoaderGetVersions), once zeInit has run; None if unknown."""
        fn = getattr(self.lib, "zelLoaderGetVersions", None)
        if fn is None:
            return None
        count = ctypes.c_size_t()
        if fn(ctypes.byref(count), None) != 0 or count.value == 0:
            return None
        versions = (structs.LoaderComponentVersion * count.value)()
        if fn(ctypes.byref(count), versions) != 0:
            return None
        for v in versions:
            if v.component_name.decode(errors="replace") == "loader":
                lib = v.component_lib_version
                return f"{lib.major}.{lib.minor}.{lib.patch}"
        return None


def load() -> Loader:
    """dlopen the loader; NotAvailable lists every path searched."""
    found = load_library(BACKEND, NAMES, env_var=ENV_LIBRARY, extra_dirs=EXTRA_DIRS, fix=FIX,
                         symbols=tuple(_SIGNATURES))
    lib = found.handle
    for name, argtypes in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_uint32
    return Loader(lib, found.path, found.searched)


def check(code: int, op: str) -> None:
    """Raise the typed error for a failed ze_result_t."""
    if code == 0:
        return
    name = result_name(code)
    if code in OUT_OF_MEMORY:
        raise OutOfMemory(BACKEND, op, code, name)
    if code in INVALID_ARGUMENT:
        raise InvalidArgument(BACKEND, op, code, name)
    raise DriverError(BACKEND, op, code, name)
