"""The README's saxpy example runs as a script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.backend("cuda")

EXAMPLE = Path(__file__).parents[2] / "examples" / "saxpy.py"


def test_saxpy_example():
    out = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "saxpy ok" in out.stdout
