"""Builds the libnrt stand-in in tests/fake (skips where there is no C compiler)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def fake_nrt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not cc:
        pytest.skip("needs a C compiler to build the libnrt stand-in")
    out = tmp_path_factory.mktemp("nrt") / "libnrt.so.1"
    source = Path(__file__).parent / "fake" / "fake_nrt.c"
    subprocess.run([cc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", str(out), str(source)], check=True)
    return out
