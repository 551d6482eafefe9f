"""Bad input: a Metal binding without the device functions."""

from __future__ import annotations

import sys
import types

import pytest

from ironaccel.errors import NotAvailable
from ironaccel_metal.backend import Backend


def test_binding_without_the_device_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Was AttributeError: module 'Metal' has no attribute 'MTLCreateSystemDefaultDevice', out of probe()."""
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setitem(sys.modules, "Metal", types.ModuleType("Metal"))
    backend = Backend()
    result = backend.probe()
    assert not result.available
    assert "has neither MTLCopyAllDevices nor MTLCreateSystemDefaultDevice" in result.reason
    with pytest.raises(NotAvailable, match="has neither"):
        backend.open(0)


def test_binding_with_only_copy_all_devices_and_none_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """MTLCopyAllDevices found nothing and there is no MTLCreateSystemDefaultDevice: was AttributeError."""
    monkeypatch.setattr(sys, "platform", "darwin")
    metal = types.ModuleType("Metal")
    metal.MTLCopyAllDevices = lambda: []  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "Metal", metal)
    result = Backend().probe()
    assert not result.available and "returned no device" in result.reason
