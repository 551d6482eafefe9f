"""Builds the QNN stand-ins in tests/fake into an SDK-shaped folder (skips without a C compiler)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ironaccel.testing import cbuild
from ironaccel_qnn import sdk


@pytest.fixture(scope="session")
def fake_sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A QNN_SDK_ROOT whose lib/<host target> holds libQnnHtp.so and libQnnSystem.so stand-ins."""
    root = tmp_path_factory.mktemp("qairt")
    lib = root / "lib" / sdk.host_targets()[0]
    lib.mkdir(parents=True)
    source = Path(__file__).parent / "fake" / "fake_qnn.c"
    for name, system in (("libQnnHtp.so", 0), ("libQnnSystem.so", 1)):
        cbuild.shared_library([source], lib / name, flags=[f"-DSYSTEM={system}"], std="gnu11")
    return root
