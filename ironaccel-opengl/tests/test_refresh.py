"""The registry is the only probe cache: its refresh() reaches the backend (issue 9)."""

from __future__ import annotations

import pytest

from ironaccel import BackendRegistry
from ironaccel_opengl import backend as backend_module

pytestmark = pytest.mark.backend("opengl")


def test_registry_refresh_creates_a_context_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    create_context = backend_module.create_context

    def counting(moderngl):  # type: ignore[no-untyped-def]
        calls.append(1)
        return create_context(moderngl)

    monkeypatch.setattr(backend_module, "create_context", counting)
    reg = BackendRegistry()
    assert reg.probe("opengl").available and reg.devices("opengl")
    assert len(calls) == 1  # probed once; devices() used what the probe found
    reg.refresh("opengl")
    assert reg.devices("opengl") and len(calls) == 2
