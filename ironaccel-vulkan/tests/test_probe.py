"""Probe and enumeration: what the Vulkan backend reports, available or not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import ironaccel
from ironaccel.errors import InvalidArgument, NotAvailable
from ironaccel.testing.pytest_plugin import require
from ironaccel.types import CapabilityFlags, ComputeTier, DeviceKind, Vendor
from ironaccel_vulkan import binding


@pytest.fixture(autouse=True)
def _vulkan() -> None:
    """Fail (under IRONACCEL_REQUIRE=vulkan) or skip when Vulkan is unusable.  Not a marker: tests that
    need a particular kind of device still skip where there is none."""
    require("vulkan")


def run_probe(env: dict[str, str], prelude: str = "") -> dict:
    """The probe's result in a fresh interpreter with `env` added (JSON)."""
    code = textwrap.dedent(
        f"""
        import json, sys
        {prelude}
        from ironaccel_vulkan import Backend
        print(json.dumps(Backend().probe().to_dict()))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_probe_reports_versions_and_loader() -> None:
    result = ironaccel.probe("vulkan")
    assert result.available and result.device_count >= 1
    assert result.runtime_version and result.runtime_version.startswith("Vulkan loader 1.")
    assert result.binding_version and result.binding_version.startswith("1.3")
    assert result.library_path and os.path.basename(result.library_path).startswith("libvulkan")
    assert os.path.exists(result.library_path)
    assert result.driver_version
    assert result.extras["instance_api_version"].startswith("1.")


def test_devices_carry_vulkan_properties() -> None:
    for d in ironaccel.devices("vulkan"):
        x = d.extras
        assert x["api_version"].count(".") == 2
        assert x["subgroup_size"] >= 1 and d.capabilities & CapabilityFlags.SUBGROUPS
        assert len(x["max_workgroup_size"]) == 3 and min(x["max_workgroup_size"]) >= 1
        assert len(x["max_workgroup_count"]) == 3 and min(x["max_workgroup_count"]) >= 65535
        assert x["max_workgroup_invocations"] >= 128
        assert d.memory_bytes == sum(h["bytes"] for h in x["memory_heaps"] if h["device_local"]) > 0
        assert x["fp16"] == bool(d.capabilities & CapabilityFlags.FP16)
        assert x["int8"] == bool(d.capabilities & CapabilityFlags.INT8)
        assert x["float64"] == bool(d.capabilities & CapabilityFlags.FP64)
        assert x["driver_name"] and x["device_uuid"]
        json.dumps(d.to_dict())


def test_lavapipe_is_a_software_cpu_device() -> None:
    soft = [d for d in ironaccel.devices("vulkan") if d.extras["device_type"] == "cpu"]
    if not soft:
        pytest.skip("no CPU Vulkan device (lavapipe) here")
    for d in soft:
        assert d.kind is DeviceKind.CPU and d.compute_tier is ComputeTier.SOFTWARE
        assert d.vendor is Vendor.MESA and d.extras["vendor_id"] == "0x10005"
        assert d.extras["unified_memory"] is True


def test_gpus_are_gpus() -> None:
    gpus = [d for d in ironaccel.devices("vulkan") if d.extras["device_type"] != "cpu"]
    if not gpus:
        pytest.skip("no Vulkan GPU here")
    for d in gpus:
        assert d.kind is DeviceKind.GPU and d.compute_tier is not ComputeTier.SOFTWARE
        if "H200" in d.name or "H100" in d.name:
            assert d.vendor is Vendor.NVIDIA and d.compute_tier is ComputeTier.DATACENTER


def test_open_checks_its_arguments() -> None:
    backend = ironaccel.backend("vulkan")
    for bad in ("0", 1.0, True, -1, 99):
        with pytest.raises(InvalidArgument) as info:
            backend.open(bad)
        assert info.value.op == "open"
    with pytest.raises(InvalidArgument):
        backend.open(0, memory="fast")
    with pytest.raises(InvalidArgument):
        backend.open(0, staging_chunk_bytes=10)


def test_no_driver_reports_the_vkresult(tmp_path) -> None:
    """With the loader pointed at a driver file that does not exist, the probe names the code."""
    result = run_probe({"VK_DRIVER_FILES": str(tmp_path / "missing_icd.json"),
                        "VK_ICD_FILENAMES": str(tmp_path / "missing_icd.json")})
    assert result["available"] is False
    assert result["code"] == -9 and result["code_name"] == "VK_ERROR_INCOMPATIBLE_DRIVER"
    assert "no usable driver" in result["reason"] and "VK_DRIVER_FILES" in result["reason"]
    assert "mesa-vulkan-drivers" in result["fix"]


def test_missing_loader_lists_where_it_looked() -> None:
    with pytest.raises(NotAvailable) as info:
        binding.load(("libvulkan-not-here.so.1",))
    exc = info.value
    assert "libvulkan-not-here.so.1" in exc.reason and "/usr/lib" in exc.reason
    assert exc.searched and any("libvulkan-not-here.so.1" in s for s in exc.searched)
    assert "libvulkan1" in (exc.fix or "")


def test_missing_binding_says_what_to_install() -> None:
    result = run_probe({}, prelude="sys.modules['vulkan'] = None")
    assert result["available"] is False
    assert "vulkan" in result["reason"] and "not installed" in result["reason"]
    assert "pip install vulkan" in result["fix"]


def test_validation_layer_missing_is_explained() -> None:
    result = run_probe({"IRONACCEL_VULKAN_VALIDATION": "1", "VK_LAYER_PATH": "/nonexistent",
                        "VK_ADD_LAYER_PATH": "", "XDG_DATA_DIRS": "/nonexistent", "XDG_DATA_HOME": "/nonexistent"},
                       prelude="")
    if result["available"]:
        pytest.skip("the validation layer is found through a path this test cannot hide")
    assert "VK_LAYER_KHRONOS_validation" in result["reason"]
    assert result["code_name"] == "VK_ERROR_LAYER_NOT_PRESENT"


def test_import_loads_nothing() -> None:
    code = "import sys, ironaccel_vulkan, ironaccel_vulkan.plugin; assert 'vulkan' not in sys.modules; " \
           "assert not [m for m in sys.modules if m.startswith('ironaccel_vulkan.') and m != 'ironaccel_vulkan.plugin']"
    subprocess.run([sys.executable, "-c", code], check=True)
