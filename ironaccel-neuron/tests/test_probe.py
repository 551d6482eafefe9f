"""Each reason the Neuron probe gives, and enumeration through a stand-in libnrt."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from ironaccel.errors import InvalidArgument, Unsupported
from ironaccel.types import CapabilityFlags, ComputeTier, DeviceKind, Vendor
from ironaccel_neuron import backend as backend_module
from ironaccel_neuron import nrt
from ironaccel_neuron.backend import Backend, capabilities


@pytest.mark.skipif(os.path.exists("/opt/aws/neuron/lib/libnrt.so.1"), reason="libnrt is installed here")
def test_not_installed_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(nrt.ENV_LIBRARY, raising=False)
    result = Backend().probe()
    assert not result.available
    assert result.reason.startswith("vendor library not found: libnrt.so.1 or libnrt.so (searched /opt/aws/neuron/lib")
    assert "/opt/aws/neuron/lib/libnrt.so.1" in result.searched
    assert "aws-neuronx-runtime-lib" in result.fix


def test_env_var_path_is_listed(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    missing = tmp_path / "neuron-sdk" / "lib"
    monkeypatch.setenv(nrt.ENV_LIBRARY, str(missing))
    monkeypatch.setattr(nrt, "NAMES", ("libnrt-missing.so.1",))
    result = Backend().probe()
    assert not result.available
    assert f"searched {missing}, /opt/aws/neuron/lib" in result.reason
    assert str(missing / "libnrt-missing.so.1") in result.searched


def test_fake_runtime_lists_visible_cores(monkeypatch: pytest.MonkeyPatch, fake_nrt) -> None:
    monkeypatch.setenv(nrt.ENV_LIBRARY, str(fake_nrt))
    monkeypatch.setenv("FAKE_NRT_MODE", "ok")
    monkeypatch.setattr(backend_module, "instance_type", lambda: "trn1.32xlarge")
    backend = Backend()
    result = backend.probe()
    assert result.available, result.reason
    assert result.runtime_version == "2.21.41.7"
    assert result.library_path == str(fake_nrt)
    assert result.extras["total_cores"] == 8 and result.extras["visible_cores"] == 4
    assert result.extras["git_hash"] == "0123abcd"
    cores = backend.devices()
    assert [d.ordinal for d in cores] == [0, 1, 2, 3]
    first = cores[0]
    assert (first.name, first.vendor, first.kind, first.compute_tier) == (
        "NeuronCore-v2 0", Vendor.AWS, DeviceKind.NPU, ComputeTier.DATACENTER)
    assert CapabilityFlags.BF16 in first.capabilities and CapabilityFlags.FP64 not in first.capabilities
    with pytest.raises(InvalidArgument):
        backend.open(4)
    with pytest.raises(InvalidArgument, match="the ordinal must be an int, got str '0'"):
        backend.open("0")  # type: ignore[arg-type]
    with pytest.raises(Unsupported):
        backend.open(0)


def test_fake_runtime_with_hidden_cores(monkeypatch: pytest.MonkeyPatch, fake_nrt) -> None:
    monkeypatch.setenv(nrt.ENV_LIBRARY, str(fake_nrt))
    monkeypatch.setenv("FAKE_NRT_MODE", "hidden")
    result = Backend().probe()
    assert not result.available
    assert result.reason == ("libnrt 2.21.41.7 loaded, but nrt_get_visible_nc_count found no NeuronCore: "
                             "none is visible to this process (NEURON_RT_VISIBLE_CORES?)")
    assert result.runtime_version == "2.21.41.7"


def test_fake_runtime_without_driver(monkeypatch: pytest.MonkeyPatch, fake_nrt) -> None:
    monkeypatch.setenv(nrt.ENV_LIBRARY, str(fake_nrt))
    monkeypatch.setenv("FAKE_NRT_MODE", "nodriver")
    result = Backend().probe()
    assert (result.code, result.code_name) == (1, "NRT_FAILURE")
    assert result.reason.startswith("nrt_get_total_nc_count returned NRT_FAILURE (1)")


def test_status_names() -> None:
    assert nrt.status_name(13) == "NRT_UNINITIALIZED"
    assert nrt.status_name(1005) == "NRT_EXEC_NC_BUSY"
    assert nrt.status_name(8) == "NRT_STATUS_8"
    assert len(set(nrt.STATUS_NAMES.values())) == len(nrt.STATUS_NAMES)


def test_version_struct_layout() -> None:
    assert nrt.Version.rt_detail.offset == 32 and nrt.Version.git_hash.offset == 160
    assert nrt.ctypes.sizeof(nrt.Version) == 224


def test_generation_flags() -> None:
    assert CapabilityFlags.BF16 not in capabilities("NeuronCore-v1")
    assert CapabilityFlags.BF16 in capabilities("NeuronCore-v3")


def test_plugin_loading_loads_no_library() -> None:
    code = textwrap.dedent(
        """
        import ironaccel
        ironaccel.registry.names(); ironaccel.registry.spec("neuron")
        assert "libnrt" not in open("/proc/self/maps").read()
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)
