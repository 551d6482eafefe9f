"""The probe's reasons on this machine and with a missing or fake loader."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import pytest

from ironaccel.errors import InvalidArgument, NotAvailable, Unsupported
from ironaccel.types import CapabilityFlags, ComputeTier, DeviceKind, Vendor
from ironaccel_levelzero import loader
from ironaccel_levelzero.backend import Backend


def _system_loader() -> ctypes.CDLL | None:
    for name in loader.NAMES:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


SYSTEM = _system_loader()


@pytest.mark.skipif(SYSTEM is None, reason="the Level Zero loader is not installed (apt-get install libze1)")
def test_loader_without_driver_reports_uninitialized(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a child without the fake driver (this session's loader was given it through ZE_ENABLE_ALT_DRIVERS)."""
    env = {k: v for k, v in os.environ.items() if k not in (loader.ENV_LIBRARY, "ZE_ENABLE_ALT_DRIVERS")}
    code = textwrap.dedent("""
        import ctypes, json
        from ironaccel_levelzero.backend import Backend
        if ctypes.CDLL("libze_loader.so.1").zeInit(0) == 0:
            print(json.dumps(None))
        else:
            r = Backend().probe()
            print(json.dumps([r.available, r.code, r.code_name, r.reason, r.library_path, r.fix]))
    """)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    found = json.loads(done.stdout)
    if found is None:
        pytest.skip("a Level Zero driver is installed here")
    available, rcode, code_name, reason, library_path, fix = found
    assert not available
    assert rcode == 0x78000001
    assert code_name == "ZE_RESULT_ERROR_UNINITIALIZED"
    assert reason.startswith("zeInit(0) returned ZE_RESULT_ERROR_UNINITIALIZED (0x78000001)")
    assert library_path and "libze_loader" in library_path
    assert library_path in reason
    assert "driver" in fix


def test_missing_library_lists_the_paths(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    missing = tmp_path / "nowhere"
    monkeypatch.setenv(loader.ENV_LIBRARY, str(missing))
    monkeypatch.setattr(loader, "NAMES", ("libze_loader_missing.so.1",))
    result = Backend().probe()
    assert not result.available
    assert result.reason.startswith("vendor library not found: libze_loader_missing.so.1")
    assert str(missing) in result.reason
    assert str(missing / "libze_loader_missing.so.1") in result.searched
    assert "dlopen(libze_loader_missing.so.1)" in result.searched
    assert loader.ENV_LIBRARY in result.fix


def test_fake_driver_enumerates_two_devices(monkeypatch: pytest.MonkeyPatch, fake_loader) -> None:
    monkeypatch.setenv(loader.ENV_LIBRARY, str(fake_loader))
    monkeypatch.setenv("FAKE_ZE_MODE", "ok")
    backend = Backend()
    result = backend.probe()
    assert result.available, result.reason
    assert result.device_count == 2 and result.library_path == str(fake_loader)
    assert result.driver_version == "16900000" and result.extras["api_version"] == "1.3"
    gpu, npu = backend.devices()
    assert (gpu.ordinal, gpu.name, gpu.vendor, gpu.kind) == (0, "Intel(R) Data Center GPU Max 1550", Vendor.INTEL,
                                                             DeviceKind.GPU)
    assert gpu.memory_bytes == 128 << 30  # two 64 GiB banks
    assert gpu.compute_tier is ComputeTier.DATACENTER
    assert gpu.extras["execution_units"] == 2 * 64 * 8
    assert gpu.extras["uuid"] == bytes(range(16)).hex()
    assert gpu.extras["subgroup_sizes"] == [16, 32]
    assert gpu.extras["spirv_version"] == "1.4" and gpu.extras["max_group_count"] == (0xFFFFFFFF, 65535, 65535)
    for flag in (CapabilityFlags.FP16, CapabilityFlags.FP64, CapabilityFlags.INT8, CapabilityFlags.MANAGED_MEMORY,
                 CapabilityFlags.SUBGROUPS, CapabilityFlags.TIMESTAMPS, CapabilityFlags.ASYNC_COPY,
                 CapabilityFlags.COOPERATIVE_LAUNCH, CapabilityFlags.RUNTIME_COMPILE):
        assert flag in gpu.capabilities, flag
    assert CapabilityFlags.MATRIX_UNITS not in gpu.capabilities  # not in the core spec: never claimed
    assert (npu.kind, npu.memory_bytes, npu.extras["integrated"]) == (DeviceKind.NPU, 0, True)
    assert npu.capabilities & (CapabilityFlags.FP64 | CapabilityFlags.ASYNC_COPY | CapabilityFlags.SUBGROUPS) == \
        CapabilityFlags.NONE
    gpu.to_dict()
    with pytest.raises(InvalidArgument):
        backend.open(2)
    with pytest.raises(InvalidArgument, match="the ordinal must be an int, got str '0'"):
        backend.open("0")  # type: ignore[arg-type]
    with pytest.raises(Unsupported) as info:
        backend.open(0)
    assert info.value.op == "open"


def test_fake_loader_without_drivers(monkeypatch: pytest.MonkeyPatch, fake_loader) -> None:
    monkeypatch.setenv(loader.ENV_LIBRARY, str(fake_loader))
    monkeypatch.setenv("FAKE_ZE_MODE", "nodrivers")
    result = Backend().probe()
    assert not result.available
    assert result.reason == f"zeDriverGet found no Level Zero driver (loader {fake_loader})"


def test_fake_driver_failure_is_named(monkeypatch: pytest.MonkeyPatch, fake_loader) -> None:
    monkeypatch.setenv(loader.ENV_LIBRARY, str(fake_loader))
    monkeypatch.setenv("FAKE_ZE_MODE", "lost")
    backend = Backend()
    result = backend.probe()
    assert (result.code, result.code_name) == (0x70000001, "ZE_RESULT_ERROR_DEVICE_LOST")
    assert result.reason.startswith("zeDeviceGet returned ZE_RESULT_ERROR_DEVICE_LOST (0x70000001)")
    with pytest.raises(NotAvailable) as info:
        backend.devices()
    assert info.value.code_name == "ZE_RESULT_ERROR_DEVICE_LOST"


def test_plugin_loading_loads_no_library() -> None:
    code = textwrap.dedent(
        """
        import ironaccel
        ironaccel.registry.names(); ironaccel.registry.spec("levelzero")
        import ironaccel_levelzero
        assert "libze_loader" not in open("/proc/self/maps").read()
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)
