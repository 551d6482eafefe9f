"""Every first-party backend that is not installed says what to pip install."""

from __future__ import annotations

import pytest

from ironaccel import NotAvailable, registry
from ironaccel.registry import FIRST_PARTY


@pytest.mark.parametrize("name", sorted(FIRST_PARTY))
def test_first_party_backend_is_installed_or_says_how(name):
    if name in registry.installed():
        dist, version = registry.distribution(name)
        assert dist == f"ironaccel-{name}" and version
        return
    result = registry.probe(name)
    assert not result.available
    assert f"no installed distribution provides backend {name!r}" in result.reason
    assert result.fix == FIRST_PARTY[name] and f"ironaccel-{name}" in result.fix  # with its extras, if any
    with pytest.raises(NotAvailable) as info:
        registry.open(name)
    assert FIRST_PARTY[name] in str(info.value)
