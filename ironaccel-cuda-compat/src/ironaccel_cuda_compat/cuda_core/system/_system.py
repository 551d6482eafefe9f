"""The parts of cuda.core's `system` (NVML) that the CUDA driver answers; NVML itself is out of the compat's scope."""

from __future__ import annotations

from .. import _ia, _needs
from .._missing import missing_function
from .._utils.version import driver_version

__all__ = [
    "CUDA_BINDINGS_NVML_IS_COMPATIBLE", "get_driver_branch", "get_kernel_mode_driver_version", "get_num_devices",
    "get_nvml_version", "get_process_name", "get_user_mode_driver_version",
]

CUDA_BINDINGS_NVML_IS_COMPATIBLE = False  # the compat offers no NVML devices


def get_num_devices() -> int:
    """The number of CUDA devices (cuDeviceGetCount)."""
    return _ia.device_count()


def get_user_mode_driver_version() -> tuple[int, ...]:
    """The CUDA version of the user-mode driver, e.g. (13, 0) (cuDriverGetVersion)."""
    return driver_version()[:2]


def get_process_name(pid: int) -> str:
    """The command name of process `pid` (from /proc)."""
    try:
        with open(f"/proc/{int(pid)}/comm") as f:
            return f.read().strip()
    except OSError as exc:
        raise RuntimeError(f"no process {pid}: {exc}") from None


get_kernel_mode_driver_version = missing_function("system.get_kernel_mode_driver_version", _needs.NVML, __name__)
get_nvml_version = missing_function("system.get_nvml_version", _needs.NVML, __name__)
get_driver_branch = missing_function("system.get_driver_branch", _needs.NVML, __name__)

