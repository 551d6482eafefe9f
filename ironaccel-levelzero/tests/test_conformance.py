"""ironaccel-levelzero against the shared conformance kits: the Backend's, and the ComputeDevice's through the
real loader and the fake driver (conftest), with OpenCL-style SPIR-V kernels."""

from pathlib import Path

from ironaccel.testing.conformance import BackendConformance, ComputeDeviceConformance
from ironaccel.testing.execution import ExecutionConformance

KERNELS = (Path(__file__).parent / "kernels" / "kernels.spv").read_bytes()


class TestLevelZeroBackend(BackendConformance):
    backend_name = "levelzero"
    # A ctypes backend has no binding: what must stay unloaded is its own loader module.
    vendor_modules = ("ironaccel_levelzero.loader", "ironaccel_levelzero.backend")


class TestLevelZeroCompute(ComputeDeviceConformance, ExecutionConformance):
    backend_name = "levelzero"
    scale_offset_code = KERNELS
    entry = "scale_offset"
    # Its last instruction (OpFunctionEnd) claims 3 words and has 1: the module load fails with a build log.
    broken_code = KERNELS[:-4] + (3 << 16 | 56).to_bytes(4, "little")
    # Kernel pointer arguments carry no element type the device checks (OpenCL SPIR-V pointers are not bindings).
    declares_element_types = False
    # typed_params_code / constants_code stay None: the device declares neither feature (OpenCL kernels take
    # scalar arguments, not a reflected params block; the fake does not specialise constants).
