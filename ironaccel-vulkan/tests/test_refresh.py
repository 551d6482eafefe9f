"""The registry is the only probe cache: refresh() sees a changed machine (issue 9)."""

from __future__ import annotations

import pytest

import ironaccel
from ironaccel import BackendRegistry, InvalidArgument

pytestmark = pytest.mark.backend("vulkan")


@pytest.mark.validation_errors_expected  # the loader reports the missing driver file, as it should
def test_refresh_probes_vulkan_again(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    reg = BackendRegistry()
    assert reg.probe("vulkan").available
    monkeypatch.setenv("VK_DRIVER_FILES", str(tmp_path / "no_such_icd.json"))
    monkeypatch.delenv("VK_ICD_FILENAMES", raising=False)
    reg.refresh("vulkan")
    gone = reg.probe("vulkan")
    assert not gone.available and gone.reason
    monkeypatch.undo()
    reg.refresh()
    assert reg.probe("vulkan").available


def test_open_with_a_str_ordinal_is_a_type_error() -> None:
    with pytest.raises(InvalidArgument) as info:
        ironaccel.open("vulkan", "0")  # type: ignore[arg-type]
    assert info.value.detail == "the ordinal must be an int, got str '0'"
