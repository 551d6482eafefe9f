"""Turning driver and NVRTC result codes into ironaccel's typed errors.

Everything here is cold: it runs only after a call has already failed, so the
success path never builds a string or an exception.  Each error names the
call that failed (`op="cuLaunchKernel"`), its numeric code and its symbolic
name (from `cuGetErrorName`, falling back to the binding's enum name).
"""

from __future__ import annotations

from typing import Any

from ironaccel.errors import (
    ClosedError,
    CompileError,
    DriverError,
    InvalidArgument,
    InvalidState,
    NotAvailable,
    OutOfMemory,
    Unsupported,
)

__all__ = [
    "BACKEND",
    "ClosedError",
    "CompileError",
    "DriverError",
    "InvalidArgument",
    "InvalidState",
    "NotAvailable",
    "OutOfMemory",
    "Unsupported",
    "driver_error",
    "invalid",
    "closed",
    "code_name",
    "code_string",
    "driver_code_name",
    "HostFuncError",
]

BACKEND = "cuda"

# Codes whose meaning is "the caller passed something wrong".
_INVALID_ARGUMENT = {
    1,  # CUDA_ERROR_INVALID_VALUE
    101,  # CUDA_ERROR_INVALID_DEVICE
    400,  # CUDA_ERROR_INVALID_HANDLE
    500,  # CUDA_ERROR_NOT_FOUND
    701,  # CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    704,  # CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
    705,  # CUDA_ERROR_PEER_ACCESS_NOT_ENABLED
    720,  # CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
    912,  # CUDA_ERROR_INVALID_CLUSTER_SIZE
    712,  # CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
    713,  # CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
}
_OUT_OF_MEMORY = {2}  # CUDA_ERROR_OUT_OF_MEMORY
# Codes that mean "not now / not in this state".
_INVALID_STATE = {3, 4, 201, 202, 600} | set(range(900, 910))
# Sticky errors: the context is unusable afterwards.
_STICKY = {700, 714, 715, 716, 717, 718, 719}
_HINTS = {
    3: "CUDA is not initialised in this process (was it forked after CUDA was used?)",
    201: "no CUDA context is current on this thread; call device.bind() in this thread",
    209: "the module has no code for this GPU's architecture; compile for this device's arch",
    218: "the PTX could not be compiled by the driver; compile to CUBIN for this device instead",
    222: "the PTX was made by a newer compiler than this driver supports; compile to CUBIN instead",
    600: "the work is not complete yet",
    700: "a kernel accessed an illegal address",
    720: "a cooperative grid must fit on the device at once: at most max_active_blocks_per_sm(block) x "
         "multiprocessor_count blocks",
    912: "the cluster does not fit: each grid dimension must be a multiple of the cluster's, and clusters above 8 "
         "blocks need LaunchConfig(non_portable_cluster=True) and a device that supports them",
}


class HostFuncError(DriverError):
    """A host function (`Stream.launch_host_func`, a graph host node) raised; `__cause__` is its exception.

    Raised by the next `synchronize()` / `query()` of the stream it ran on;
    `others` holds the later failures reported at the same time.
    """

    def __init__(self, detail: str):
        self.others: list[HostFuncError] = []
        super().__init__(BACKEND, "cuLaunchHostFunc", detail=detail)


def driver_code_name(code: int) -> str | None:
    """The driver's own name of a CUresult (cuGetErrorName), or None where the driver does not know the code.

    For callers that word their own message for codes the driver cannot name; `code_name` always names one.
    """
    try:
        from cuda.bindings import driver

        err, name = driver.cuGetErrorName(driver.CUresult(code))
        if not err and name:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        pass
    return None


def code_name(code: int) -> str:
    """The symbolic name of a CUresult (cuGetErrorName, else the enum name)."""
    name = driver_code_name(code)
    if name is not None:
        return name
    try:
        from cuda.bindings import driver

        return driver.CUresult(code).name
    except Exception:
        return f"CUresult {code}"


def code_string(code: int) -> str | None:
    """The driver's description of a CUresult (cuGetErrorString), e.g. "invalid argument"; None where it has none.

    The text typed errors carry after the code's name; public for code that words its own messages.
    """
    try:
        from cuda.bindings import driver

        err, text = driver.cuGetErrorString(driver.CUresult(code))
        if not err and text:
            return text.decode() if isinstance(text, bytes) else str(text)
    except Exception:
        pass
    return None


def driver_error(code: Any, op: str, detail: str | None = None) -> DriverError:
    """The typed error for driver result `code` returned by `op` (not raised)."""
    code = int(code)
    name = code_name(code)
    parts = [p for p in (detail, code_string(code), _HINTS.get(code)) if p]
    if code in _STICKY:
        parts.append("the CUDA context is now unusable; the process must exit to recover")
    text = "; ".join(dict.fromkeys(parts)) or None
    if code in _OUT_OF_MEMORY:
        return OutOfMemory(BACKEND, op, code, name, text)
    if code in _INVALID_ARGUMENT:
        return InvalidArgument(BACKEND, op, code, name, text)
    if code in _INVALID_STATE:
        return InvalidState(BACKEND, op, code, name, text)
    return DriverError(BACKEND, op, code, name, text)


def invalid(op: str, detail: str) -> InvalidArgument:
    """Input rejected by ironaccel before any driver call."""
    return InvalidArgument(BACKEND, op, detail=detail)


def closed(op: str, what: str) -> ClosedError:
    return ClosedError(BACKEND, op, what)
