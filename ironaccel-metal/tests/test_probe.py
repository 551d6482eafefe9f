"""The Metal probe's reasons, and MTLDevice translation against a stand-in Metal module.

The stand-in has pyobjc's calling convention (getters are methods,
``supportsFamily_`` takes the family constant); it proves this package's
logic, not pyobjc's, which needs a Mac (see README).
"""

from __future__ import annotations

import sys
import types

import pytest

from ironaccel.errors import InvalidArgument, Unsupported
from ironaccel.types import CapabilityFlags, DeviceKind, Vendor
from ironaccel_metal.backend import Backend


@pytest.mark.skipif(sys.platform == "darwin", reason="this is macOS")
def test_reason_off_macos() -> None:
    result = Backend().probe()
    assert not result.available
    assert result.reason == f"runs only on darwin; this is {sys.platform}"


def test_binding_missing_on_macos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setitem(sys.modules, "Metal", None)
    result = Backend().probe()
    assert result.reason == "the Python binding Metal is not installed (distribution pyobjc-framework-Metal)"
    assert "ironaccel-metal[metal]" in result.fix


class FakeDevice:
    def __init__(self, name: str, unified: bool, families: set[int], working_set: int):
        self._name, self._unified, self._families, self._ws = name, unified, families, working_set

    def name(self) -> str:
        return self._name

    def hasUnifiedMemory(self) -> bool:  # pyobjc spells getters as Objective-C does
        return self._unified

    def supportsFamily_(self, family: int) -> bool:
        return family in self._families

    def recommendedMaxWorkingSetSize(self) -> int:
        return self._ws

    def registryID(self) -> int:
        return 0x100000A5B

    def isLowPower(self) -> bool:
        return False

    def isHeadless(self) -> bool:
        return False

    def isRemovable(self) -> bool:
        return False

    def maxBufferLength(self) -> int:
        return self._ws // 2


def _fake_metal(devices: list[FakeDevice]) -> types.ModuleType:
    metal = types.ModuleType("Metal")
    metal.MTLGPUFamilyApple7 = 1007  # type: ignore[attr-defined]
    metal.MTLGPUFamilyMac2 = 2002  # type: ignore[attr-defined]
    metal.MTLCopyAllDevices = lambda: list(devices)  # type: ignore[attr-defined]
    metal.MTLCreateSystemDefaultDevice = lambda: devices[0] if devices else None  # type: ignore[attr-defined]
    return metal


def test_translation_with_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    m3 = FakeDevice("Apple M3 Max", True, {1007, 2002}, 100 << 30)
    radeon = FakeDevice("AMD Radeon Pro 5500M", False, {2002}, 8 << 30)
    monkeypatch.setitem(sys.modules, "Metal", _fake_metal([m3, radeon]))
    backend = Backend()
    result = backend.probe()
    assert result.available and result.device_count == 2
    apple, amd = backend.devices()
    assert (apple.name, apple.vendor, apple.kind, apple.memory_bytes) == ("Apple M3 Max", Vendor.APPLE,
                                                                          DeviceKind.GPU, 100 << 30)
    assert CapabilityFlags.MATRIX_UNITS in apple.capabilities
    assert CapabilityFlags.UNIFIED_ADDRESSING in apple.capabilities
    assert CapabilityFlags.FP64 not in apple.capabilities  # Metal has no double
    assert apple.extras["registry_id"] == 0x100000A5B and apple.extras["max_buffer_length"] == 50 << 30
    assert amd.vendor is Vendor.AMD and CapabilityFlags.MATRIX_UNITS not in amd.capabilities
    assert CapabilityFlags.SUBGROUPS in amd.capabilities
    apple.to_dict()
    with pytest.raises(InvalidArgument):
        backend.open(2)
    with pytest.raises(Unsupported):
        backend.open(0)


def test_no_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setitem(sys.modules, "Metal", _fake_metal([]))
    result = Backend().probe()
    assert not result.available
    assert result.reason.startswith("MTLCopyAllDevices and MTLCreateSystemDefaultDevice returned no device")
