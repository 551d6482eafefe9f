"""hip-python, imported on demand, and one way to call it.

hip-python's functions return a tuple whose first item is a ``hipError_t``
enum; `call` checks it and raises a typed error naming the HIP function, so
the rest of the package never looks at error codes.  hip-python resolves
``libamdhip64`` itself on the first call (ROCM_PATH, /opt/rocm, the loader);
if it cannot, that call raises RuntimeError, which `call` turns into
`NotAvailable`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ironaccel.errors import DriverError, InvalidArgument, NotAvailable, OutOfMemory
from ironaccel.probing import distribution_version, import_binding

BACKEND = "rocm"
DISTRIBUTION = "hip-python"
FIX_BINDING = "pip install 'ironaccel-rocm[hip]' (hip-python, matching the installed ROCm major version)"
FIX_RUNTIME = "install the ROCm HIP runtime (libamdhip64) and an AMD GPU driver, or set ROCM_PATH"
KFD = "/dev/kfd"


def fix_no_device() -> str:
    """What to do when the HIP runtime loaded but found no GPU: about the kernel driver, not the runtime."""
    if not os.path.exists(KFD):
        return (f"the HIP runtime is installed; it needs an AMD GPU that ROCm supports and the amdgpu kernel driver, "
                f"and {KFD} does not exist here (no GPU, or the driver is not loaded: modprobe amdgpu)")
    if not os.access(KFD, os.R_OK | os.W_OK):
        return (f"the HIP runtime is installed and {KFD} exists but this user cannot open it: "
                "add the user to the render and video groups")
    return ("the HIP runtime is installed and the amdgpu kernel driver is loaded: check that the GPU is one "
            "this ROCm supports (HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES may also hide it)")

HIP_SUCCESS = 0
HIP_ERROR_NO_DEVICE = 100
_OUT_OF_MEMORY = {2}  # hipErrorOutOfMemory
#: hipErrorInvalidValue, InvalidConfiguration, InvalidSymbol, InvalidDevicePointer, InvalidDeviceFunction,
#: InvalidDevice, InvalidImage, NoBinaryForGpu, InvalidHandle, NotFound: the caller passed something wrong.
_INVALID = {1, 9, 13, 17, 98, 101, 200, 209, 400, 500}


def load() -> ModuleType:
    """The `hip` module of hip-python (`from hip import hip`); NotAvailable if missing."""
    package = import_binding(BACKEND, "hip", DISTRIBUTION, fix=FIX_BINDING)
    module = getattr(package, "hip", None)
    if not isinstance(module, ModuleType):
        raise NotAvailable(BACKEND, f"{DISTRIBUTION} is installed but has no hip.hip module", fix=FIX_BINDING)
    return module


def function(hip: ModuleType, name: str) -> Callable[..., Any]:
    """hip-python's function `name`; NotAvailable if this hip-python lacks it (a version mismatch)."""
    fn = getattr(hip, name, None)
    if not callable(fn):
        version = distribution_version(DISTRIBUTION) or "of unknown version"
        raise NotAvailable(BACKEND, f"{DISTRIBUTION} {version} has no hip.{name}", fix=FIX_BINDING)
    return fn


def code_of(err: Any) -> int:
    return int(getattr(err, "value", err))


def name_of(err: Any) -> str:
    """The symbolic name (``hipErrorNoDevice``) of a hipError_t or an int."""
    name = getattr(err, "name", None)
    return str(name) if name else f"hipError({code_of(err)})"


def call(fn: Callable[..., Any], op: str, *args: Any) -> Any:
    """Call a hip-python function; return its value(s) after the error, or raise.

    Returns None, one value, or a tuple, as the C function has 0, 1 or more
    outputs.  A failure to load libamdhip64 becomes NotAvailable.
    """
    try:
        result = fn(*args)
    except RuntimeError as exc:  # hip-python could not dlopen libamdhip64 or find the symbol
        raise NotAvailable(BACKEND, f"hip-python could not load the HIP runtime for {op}: {exc}",
                           fix=FIX_RUNTIME, library="libamdhip64.so") from exc
    except (TypeError, ValueError, OverflowError) as exc:  # hip-python refused an argument before calling HIP
        raise InvalidArgument(BACKEND, op, detail=f"hip-python refused the arguments: {exc}") from None
    if not isinstance(result, tuple):
        result = (result,)
    err, values = result[0], result[1:]
    code = code_of(err)
    if code != HIP_SUCCESS:
        name = name_of(err)
        if code in _OUT_OF_MEMORY:
            raise OutOfMemory(BACKEND, op, code, name)
        if code in _INVALID:
            raise InvalidArgument(BACKEND, op, code, name)
        raise DriverError(BACKEND, op, code, name)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def format_version(version: int) -> str:
    """HIP's packed version (major*10_000_000 + minor*100_000 + patch) as text: 50221153 -> '5.2.21153'."""
    return f"{version // 10_000_000}.{version // 100_000 % 100}.{version % 100_000}"
