"""Fixtures that build the C stand-ins in tests/fake against the real Level Zero headers.

The fake driver (tests/fake/fake_ze_driver.c) is built when this conftest is imported and named in
ZE_ENABLE_ALT_DRIVERS, so the real loader (libze1) finds it at the session's first zeInit: the backend
then probes, opens and runs kernels through the loader exactly as on hardware.  Without a compiler, the
headers or the loader, nothing is set and the device tests skip with the probe's reason.  Fixtures
skip (with the reason) where the header (apt-get install libze-dev) or a C compiler is missing.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from ironaccel.testing import cbuild

FAKE = Path(__file__).parent / "fake"
KERNELS = Path(__file__).parent / "kernels" / "kernels.spv"
HEADER = Path("/usr/include/level_zero/ze_api.h")
DDI = Path("/usr/include/level_zero/ze_ddi.h")
ALT_DRIVERS = "ZE_ENABLE_ALT_DRIVERS"


def _build_fake_driver() -> str | None:
    """Build the fake driver into a temporary folder; its path, or None where it cannot be built here."""
    if cbuild.missing([HEADER, DDI]) is not None:
        return None
    out = Path(tempfile.mkdtemp(prefix="ironaccel-ze-")) / "libze_ironaccel_fake.so"
    cbuild.build([FAKE / "fake_ze_driver.c"], out, shared=True, headers=[HEADER, DDI],
                 flags=["-D_POSIX_C_SOURCE=200809L"])
    return str(out)


#: The fake driver the loader was told about (None: not built here).
FAKE_DRIVER = _build_fake_driver()
if FAKE_DRIVER is not None:
    os.environ[ALT_DRIVERS] = FAKE_DRIVER


@pytest.fixture(scope="session")
def kernels_spv() -> bytes:
    """OpenCL-style SPIR-V with the kernels scale_offset and saxpy (tests/kernels/kernels.spvasm)."""
    return KERNELS.read_bytes()


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
