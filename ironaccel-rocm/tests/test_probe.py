"""The probe on this machine, and each reason it can give."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from ironaccel.errors import NotAvailable
from ironaccel_rocm.backend import Backend

try:
    from hip import hip as _hip

    HIP_RUNTIME = _hip.hipRuntimeGetVersion()[0] == 0
except Exception:  # binding missing or libamdhip64 not loadable
    HIP_RUNTIME = False

HAS_AMD_GPU = os.path.exists("/dev/kfd")


@pytest.mark.skipif(not HIP_RUNTIME, reason="needs hip-python and libamdhip64 (apt-get install libamdhip64-dev)")
@pytest.mark.skipif(HAS_AMD_GPU, reason="this machine has an AMD GPU (/dev/kfd)")
def test_runtime_without_gpu_reports_hip_error_no_device() -> None:
    result = Backend().probe()
    assert not result.available
    assert result.code == 100
    assert result.code_name == "hipErrorNoDevice"
    assert "hipGetDeviceCount returned hipErrorNoDevice (100)" in result.reason
    assert result.runtime_version and result.runtime_version in result.reason
    assert result.binding_version
    assert result.library_path and "libamdhip64" in result.library_path
    # The runtime loaded, so the fix is about the GPU and its kernel driver, not installing the runtime.
    assert "install the ROCm HIP runtime" not in result.fix
    assert "the HIP runtime is installed" in result.fix and "/dev/kfd" in result.fix


@pytest.mark.skipif(not HIP_RUNTIME, reason="needs hip-python and libamdhip64")
@pytest.mark.skipif(HAS_AMD_GPU, reason="this machine has an AMD GPU (/dev/kfd)")
def test_devices_and_open_raise_the_probe_reason() -> None:
    backend = Backend()
    reason = backend.probe().reason
    for call in (backend.devices, backend.open):
        with pytest.raises(NotAvailable) as info:
            call()
        assert info.value.reason == reason
        assert info.value.code_name == "hipErrorNoDevice"


def test_binding_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hip", None)  # makes `import hip` raise ImportError
    result = Backend().probe()
    assert not result.available
    assert result.reason == "the Python binding hip is not installed (distribution hip-python)"
    assert "ironaccel-rocm[hip]" in result.fix


def test_import_loads_nothing() -> None:
    code = textwrap.dedent(
        """
        import sys
        import ironaccel_rocm
        from ironaccel_rocm import Program, Backend
        Program('extern "C" __global__ void k() {}')
        Backend()
        assert not [m for m in ("hip", "rocm") if m in sys.modules], sys.modules.keys()
        maps = open("/proc/self/maps").read()
        assert "libamdhip64" not in maps and "libhiprtc" not in maps
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)
