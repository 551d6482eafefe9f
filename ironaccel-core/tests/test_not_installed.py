"""Every first-party backend that is not installed says what to pip install."""

from __future__ import annotations

import pytest

from ironaccel import NotAvailable, registry
from ironaccel.registry import FIRST_PARTY, install_hint


@pytest.mark.parametrize("name", sorted(FIRST_PARTY))
def test_first_party_backend_is_installed_or_says_how(name):
    if name in registry.installed():
        dist, version = registry.distribution(name)
        assert dist == f"ironaccel-{name}" and version
        return
    result = registry.probe(name)
    assert not result.available
    assert f"no installed distribution provides backend {name!r}" in result.reason
    # true from the index and from a checkout, with its extras, if any
    assert result.fix == install_hint(name) and result.fix.startswith(FIRST_PARTY[name])
    assert f"./ironaccel-{name}" in result.fix
    with pytest.raises(NotAvailable) as info:
        registry.open(name)
    assert FIRST_PARTY[name] in str(info.value)
