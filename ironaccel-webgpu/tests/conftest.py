"""A private XDG_RUNTIME_DIR for wgpu-native and the loaders under it (they complain without one), and `device`."""

import os
import tempfile

import pytest

from ironaccel.registry import registry

if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
    os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="ironaccel-xdg-")  # mkdtemp makes it mode 700


@pytest.fixture
def device():
    """Device 0 of the webgpu backend, closed after the test (test_conformance's classes bring their own)."""
    dev = registry.open("webgpu", 0)
    try:
        yield dev
    finally:
        dev.close()
