"""Bad input: a library that loads but is not libnrt."""

from __future__ import annotations

import pytest

from ironaccel.errors import NotAvailable
from ironaccel.probing import loaded_library
from ironaccel_neuron import nrt
from ironaccel_neuron.backend import Backend


def test_library_without_the_nrt_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Was AttributeError 'undefined symbol: nrt_get_version' out of probe(), devices() and open()."""
    libc = loaded_library("libc.so")
    assert libc, "libc is not mapped in this process"
    monkeypatch.setenv(nrt.ENV_LIBRARY, libc)
    backend = Backend()
    result = backend.probe()
    assert not result.available
    assert f"{libc} loaded but does not export nrt_get_version, nrt_get_total_nc_count" in result.reason
    with pytest.raises(NotAvailable, match="does not export nrt_get_version"):
        backend.devices()
