"""The paths that need an AMD GPU, run against a fake hip-python module.

The fake has hip-python's calling convention (a tuple led by a hipError_t
enum) and hipDeviceProp_t's attribute names, so these tests prove the
backend's own logic: step order, error names, enumeration, open/close.  They
do not prove hip-python's struct layout against a real driver; that needs an
AMD GPU (see README).
"""

from __future__ import annotations

import enum
import types
from typing import Any

import pytest

from ironaccel.errors import ClosedError, InvalidArgument, NotAvailable
from ironaccel.types import CapabilityFlags, ComputeTier, DeviceKind, Vendor
from ironaccel_rocm import backend as backend_module
from ironaccel_rocm import binding
from ironaccel_rocm.backend import Backend


class HipError(enum.IntEnum):
    hipSuccess = 0
    hipErrorInvalidValue = 1
    hipErrorNoDevice = 100
    hipErrorInvalidDevice = 101


def _props(name: bytes, arch: bytes, memory: int, **extra: Any) -> types.SimpleNamespace:
    base = dict(
        name=name + b"\0garbage", gcnArchName=arch, totalGlobalMem=memory, multiProcessorCount=104,
        warpSize=64, clockRate=1_700_000, maxThreadsPerBlock=1024, sharedMemPerBlock=65536,
        l2CacheSize=8 << 20, pciDomainID=0, pciBusID=0x43, pciDeviceID=0, integrated=0, ECCEnabled=1,
        unifiedAddressing=1, managedMemory=1, canMapHostMemory=1, memoryPoolsSupported=1,
        cooperativeLaunch=1, asyncEngineCount=2, arch=types.SimpleNamespace(hasDoubles=1),
    )
    base.update(extra)
    return types.SimpleNamespace(**base)


class FakeHip(types.ModuleType):
    """hip-python's `hip` module, reduced to what the backend calls."""

    def __init__(self, props: list[Any], count_error: HipError = HipError.hipSuccess, peer: bool = True):
        super().__init__("fake_hip")
        self.props, self.count_error, self.peer = props, count_error, peer
        self.current: int | None = None
        self.synced = 0

    def hipRuntimeGetVersion(self):
        return (HipError.hipSuccess, 60_342_134)

    def hipDriverGetVersion(self):
        return (HipError.hipSuccess, 60_342_134)

    def hipGetDeviceCount(self):
        ok = self.count_error is HipError.hipSuccess
        return (self.count_error, len(self.props) if ok else 0)

    def hipGetDeviceProperties(self, ordinal: int):
        if not 0 <= ordinal < len(self.props):
            return (HipError.hipErrorInvalidDevice, None)
        return (HipError.hipSuccess, self.props[ordinal])

    def hipDeviceCanAccessPeer(self, a: int, b: int):
        return (HipError.hipSuccess, int(self.peer))

    def hipSetDevice(self, ordinal: int):
        if not 0 <= ordinal < len(self.props):
            return (HipError.hipErrorInvalidDevice,)
        self.current = ordinal
        return (HipError.hipSuccess,)

    def hipDeviceSynchronize(self):
        self.synced += 1
        return (HipError.hipSuccess,)


MI300X = _props(b"AMD Instinct MI300X", b"gfx942:sramecc+:xnack-", 192 << 30)
W7900 = _props(b"AMD Radeon PRO W7900", b"gfx1100", 48 << 30, ECCEnabled=0, cooperativeLaunch=0)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    def install(hip: FakeHip) -> FakeHip:
        monkeypatch.setattr(binding, "load", lambda: hip)
        monkeypatch.setattr(backend_module.binding, "load", lambda: hip)
        return hip

    return install


def test_enumerates_devices_with_translated_flags(fake) -> None:
    fake(FakeHip([MI300X, W7900]))
    backend = Backend()
    result = backend.probe()
    assert result.available and result.device_count == 2
    assert result.runtime_version == "6.3.42134"
    mi300, w7900 = backend.devices()
    assert (mi300.ordinal, mi300.name) == (0, "AMD Instinct MI300X")
    assert (mi300.vendor, mi300.kind) == (Vendor.AMD, DeviceKind.GPU)
    assert mi300.memory_bytes == 192 << 30
    assert mi300.compute_tier is ComputeTier.DATACENTER
    assert mi300.extras["isa"] == "gfx942" and mi300.extras["gcn_arch_name"] == "gfx942:sramecc+:xnack-"
    assert mi300.extras["pci_bus_id"] == "0000:43:00"
    for flag in (CapabilityFlags.MATRIX_UNITS, CapabilityFlags.BF16, CapabilityFlags.INT8, CapabilityFlags.FP64,
                 CapabilityFlags.PEER_ACCESS, CapabilityFlags.MEMORY_POOLS, CapabilityFlags.COOPERATIVE_LAUNCH,
                 CapabilityFlags.ASYNC_COPY, CapabilityFlags.RUNTIME_COMPILE):
        assert flag in mi300.capabilities, flag
    assert w7900.compute_tier is ComputeTier.WORKSTATION
    assert CapabilityFlags.MATRIX_UNITS in w7900.capabilities  # WMMA on RDNA3
    assert CapabilityFlags.COOPERATIVE_LAUNCH not in w7900.capabilities
    mi300.to_dict()


def test_single_device_has_no_peer_access(fake) -> None:
    fake(FakeHip([MI300X]))
    (only,) = Backend().devices()
    assert CapabilityFlags.PEER_ACCESS not in only.capabilities


def test_device_count_error_is_named(fake) -> None:
    fake(FakeHip([], count_error=HipError.hipErrorNoDevice))
    result = Backend().probe()
    assert not result.available
    assert (result.code, result.code_name) == (100, "hipErrorNoDevice")
    assert result.runtime_version == "6.3.42134"


def test_runtime_that_cannot_be_loaded(fake) -> None:
    hip = FakeHip([MI300X])

    def broken():
        raise RuntimeError("failed to dlopen 'b'libamdhip64.so'': cannot open shared object file")

    hip.hipRuntimeGetVersion = broken  # type: ignore[method-assign]
    fake(hip)
    result = Backend().probe()
    assert not result.available
    assert result.reason.startswith("hip-python could not load the HIP runtime for hipRuntimeGetVersion")
    assert "libamdhip64.so" in result.reason


def test_open_selects_and_closes(fake) -> None:
    hip = fake(FakeHip([MI300X, W7900]))
    backend = Backend()
    dev = backend.open(1)
    assert hip.current == 1 and dev.descriptor.name == "AMD Radeon PRO W7900"
    dev.synchronize()
    assert hip.synced == 1
    dev.close()
    dev.close()  # twice is a no-op
    with pytest.raises(ClosedError) as info:
        dev.synchronize()
    assert info.value.op == "hipDeviceSynchronize"
    for bad in (2, -1, True, "0"):
        with pytest.raises(InvalidArgument) as bad_info:
            backend.open(bad)  # type: ignore[arg-type]
        assert bad_info.value.op == "open"
        assert ("must be an int" if isinstance(bad, (bool, str)) else "out of range") in bad_info.value.detail


def test_driver_errors_are_typed(fake) -> None:
    hip = fake(FakeHip([MI300X]))
    with pytest.raises(InvalidArgument) as info:
        binding.call(hip.hipGetDeviceProperties, "hipGetDeviceProperties", 7)
    assert (info.value.code, info.value.code_name, info.value.op) == (101, "hipErrorInvalidDevice",
                                                                     "hipGetDeviceProperties")
    with pytest.raises(NotAvailable):
        binding.call(lambda: (_ for _ in ()).throw(RuntimeError("failed to dlopen")), "hipInit")


def test_compile_without_arch_targets_the_first_device(fake) -> None:
    from ironaccel_rocm import hiprtc
    from ironaccel_rocm.compiler import Program, amdgpu_mach

    try:
        hiprtc.load()
    except NotAvailable as exc:
        pytest.skip(f"hipRTC unavailable: {exc.reason}")
    fake(FakeHip([_props(b"AMD Instinct MI210", b"gfx90a:sramecc+:xnack-", 64 << 30)]))
    code = Program('extern "C" __global__ void k(int* y) { y[0] = 1; }').compile()
    assert code.arch == "gfx90a:sramecc+:xnack-" and code.options[0] == "--offload-arch=gfx90a:sramecc+:xnack-"
    assert amdgpu_mach(code) == 0x03F  # EF_AMDGPU_MACH_AMDGCN_GFX90A
