"""Each reason the QNN probe gives, and the provider read through stand-in libraries."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ironaccel.errors import InvalidArgument, Unsupported
from ironaccel.types import ComputeTier, DeviceKind, Vendor
from ironaccel_qnn import interface, sdk
from ironaccel_qnn.backend import Backend


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv(sdk.ENV_LIBRARY, raising=False)
    monkeypatch.delenv(sdk.ENV_SDK_ROOT, raising=False)
    return monkeypatch


def test_not_installed_says_nothing_points_at_an_sdk(clean_env) -> None:
    result = Backend().probe()
    if result.available:
        pytest.skip("a QNN HTP library is on the system search path")
    assert result.reason.startswith("vendor library not found: libQnnHtp.so (searched ")
    assert result.reason.endswith("neither QNN_SDK_ROOT nor IRONACCEL_QNN_LIBRARY is set")
    assert "QNN_SDK_ROOT" in result.fix


def test_sdk_root_that_is_missing(clean_env, tmp_path) -> None:
    root = tmp_path / "qairt" / "2.30.0"
    clean_env.setenv(sdk.ENV_SDK_ROOT, str(root))
    result = Backend().probe()
    assert not result.available
    expected = root / "lib" / sdk.host_targets()[0]
    assert f"searched {expected}" in result.reason
    assert str(expected / "libQnnHtp.so") in result.searched
    assert "neither" not in result.reason


def test_explicit_library_folder_that_is_missing(clean_env, tmp_path) -> None:
    clean_env.setenv(sdk.ENV_LIBRARY, str(tmp_path / "qnn-libs"))
    result = Backend().probe()
    assert not result.available
    assert str(tmp_path / "qnn-libs") in result.reason


def test_host_targets() -> None:
    targets = sdk.host_targets()
    assert targets and all(isinstance(t, str) for t in targets)
    if sys.platform == "linux" and sdk.emulated():
        assert targets == ("x86_64-linux-clang",)


def test_fake_sdk_provider_and_build_id(clean_env, fake_sdk) -> None:
    clean_env.setenv(sdk.ENV_SDK_ROOT, str(fake_sdk))
    clean_env.setenv("FAKE_QNN_MODE", "ok")
    backend = Backend()
    result = backend.probe()
    assert result.available, result.reason
    lib = fake_sdk / "lib" / sdk.host_targets()[0]
    assert result.library_path == str(lib / "libQnnHtp.so")
    assert result.runtime_version == "2.14.0" and result.driver_version == "v2.20.0.240223"
    assert result.extras["providers"] == [{"name": "HTP_QTI_AISW", "backend": "htp", "core_api": "2.14.0",
                                           "backend_api": "5.14.0"}]
    assert result.extras["system_library"] == str(lib / "libQnnSystem.so")
    (npu,) = backend.devices()
    assert (npu.vendor, npu.kind) == (Vendor.QUALCOMM, DeviceKind.NPU)
    assert npu.extras["backend_api"] == "5.14.0"
    if sdk.emulated():
        assert npu.compute_tier is ComputeTier.SOFTWARE and "emulated" in npu.name
    with pytest.raises(InvalidArgument):
        backend.open(1)
    with pytest.raises(InvalidArgument, match="the ordinal must be an int, got str '0'"):
        backend.open("0")  # type: ignore[arg-type]
    with pytest.raises(Unsupported):
        backend.open(0)


def test_fake_sdk_without_providers(clean_env, fake_sdk) -> None:
    clean_env.setenv(sdk.ENV_SDK_ROOT, str(fake_sdk))
    clean_env.setenv("FAKE_QNN_MODE", "none")
    result = Backend().probe()
    assert not result.available
    assert result.reason.startswith("QnnInterface_getProviders of ") and result.reason.endswith("returned no provider")


def test_fake_sdk_error_code_uses_the_low_16_bits(clean_env, fake_sdk) -> None:
    clean_env.setenv(sdk.ENV_LIBRARY, str(fake_sdk / "lib" / sdk.host_targets()[0] / "libQnnHtp.so"))
    clean_env.setenv("FAKE_QNN_MODE", "error")
    result = Backend().probe()
    assert (result.code, result.code_name) == (1008, "QNN_COMMON_ERROR_INCOMPATIBLE_BINARIES")
    assert result.reason.startswith("QnnInterface_getProviders returned QNN_COMMON_ERROR_INCOMPATIBLE_BINARIES (1008)")


def test_error_names_and_layout() -> None:
    assert interface.error_code((7 << 16) | 1004) == 1004
    assert interface.error_name(1004) == "QNN_COMMON_ERROR_INVALID_ARGUMENT"
    assert interface.error_name(4321) == "QNN_ERROR_4321"
    assert interface.InterfaceHead.providerName.offset == 8  # uint32 backendId, padded to the pointer
    assert interface.InterfaceHead.apiVersion.offset == 16
    assert interface.ctypes.sizeof(interface.ApiVersion) == 24


def test_plugin_loading_loads_no_library() -> None:
    code = textwrap.dedent(
        """
        import ironaccel
        ironaccel.registry.names(); ironaccel.registry.spec("qnn")
        assert "libQnn" not in open("/proc/self/maps").read()
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)
