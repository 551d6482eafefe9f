"""The registry is the only probe cache: its refresh() reaches the backend (issue 9)."""

from __future__ import annotations

import pytest

from ironaccel import BackendRegistry
from ironaccel_webgpu import backend as backend_module

pytestmark = pytest.mark.backend("webgpu")


def test_registry_refresh_enumerates_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    enumerate_adapters = backend_module.enumerate_adapters

    def counting(wgpu):  # type: ignore[no-untyped-def]
        calls.append(1)
        return enumerate_adapters(wgpu)

    monkeypatch.setattr(backend_module, "enumerate_adapters", counting)
    reg = BackendRegistry()
    assert reg.probe("webgpu").available and reg.devices("webgpu")
    assert len(calls) == 1  # probed once; devices() used what the probe found
    reg.refresh("webgpu")
    assert reg.devices("webgpu") and len(calls) == 2
