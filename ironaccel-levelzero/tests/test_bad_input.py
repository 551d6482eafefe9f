"""Bad input: a library that loads but is not the Level Zero loader."""

from __future__ import annotations

import pytest

from ironaccel.errors import NotAvailable
from ironaccel.probing import loaded_library
from ironaccel_levelzero import loader
from ironaccel_levelzero.backend import Backend


def test_library_without_the_level_zero_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Was AttributeError 'undefined symbol: zeInit' out of probe(), devices() and open()."""
    libc = loaded_library("libc.so")
    assert libc, "libc is not mapped in this process"
    monkeypatch.setenv(loader.ENV_LIBRARY, libc)
    backend = Backend()
    result = backend.probe()
    assert not result.available
    assert f"{libc} loaded but does not export zeInit" in result.reason
    with pytest.raises(NotAvailable, match="does not export zeInit"):
        backend.open(0)
