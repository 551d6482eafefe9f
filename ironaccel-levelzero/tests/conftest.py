"""Fixtures that build the C stand-ins in tests/fake against the real Level Zero header.

They skip (with the reason) where the header (apt-get install libze-dev) or a
C compiler is missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ironaccel.testing import cbuild

FAKE = Path(__file__).parent / "fake"
HEADER = Path("/usr/include/level_zero/ze_api.h")


def _build(source: str, out: Path, *, shared: bool) -> Path:
    if not HEADER.exists():
        pytest.skip("needs the Level Zero header (apt-get install libze-dev)")
    return cbuild.build([FAKE / source], out, shared=shared, headers=[HEADER])


@pytest.fixture(scope="session")
def ze_header() -> Path:
    """The spec header ze_api.h."""
    if not HEADER.exists():
        pytest.skip("needs the Level Zero header (apt-get install libze-dev)")
    return HEADER


@pytest.fixture(scope="session")
def fake_loader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A libze_loader stand-in with a GPU and an NPU (FAKE_ZE_MODE picks failures)."""
    return _build("fake_ze_loader.c", tmp_path_factory.mktemp("ze") / "libze_loader.so.1", shared=True)


@pytest.fixture(scope="session")
def layout_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A program printing sizeof/offsetof of the mirrored structs from the real header."""
    return _build("layout.c", tmp_path_factory.mktemp("ze") / "layout", shared=False)
