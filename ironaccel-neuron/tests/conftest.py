"""Builds the libnrt stand-in in tests/fake (skips where there is no C compiler)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ironaccel.testing import cbuild


@pytest.fixture(scope="session")
def fake_nrt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cbuild.shared_library([Path(__file__).parent / "fake" / "fake_nrt.c"],
                                 tmp_path_factory.mktemp("nrt") / "libnrt.so.1", std="gnu11")
