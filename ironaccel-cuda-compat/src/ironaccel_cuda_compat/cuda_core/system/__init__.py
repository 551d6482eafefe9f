"""cuda.core's `system`: device count and driver version from the CUDA driver (NVML is out of scope)."""

from ._system import (
    CUDA_BINDINGS_NVML_IS_COMPATIBLE,
    get_driver_branch,
    get_kernel_mode_driver_version,
    get_num_devices,
    get_nvml_version,
    get_process_name,
    get_user_mode_driver_version,
)

__all__ = [
    "CUDA_BINDINGS_NVML_IS_COMPATIBLE", "get_driver_branch", "get_kernel_mode_driver_version", "get_num_devices",
    "get_nvml_version", "get_process_name", "get_user_mode_driver_version",
]

