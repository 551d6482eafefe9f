"""Shared set-up for the ironaccel-vulkan tests.

* XDG_RUNTIME_DIR is pointed at a private folder (the loader and Mesa complain otherwise).
* Every test fails if the Vulkan validation layer (when enabled: IRONACCEL_VULKAN_VALIDATION=1,
  VK_INSTANCE_LAYERS, or a validated device) reported an error while it ran, unless the test is
  marked `validation_errors_expected` and checks them itself.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

if not os.environ.get("XDG_RUNTIME_DIR") or not os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
    os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="ironaccel-xdg-")  # mkdtemp makes it mode 700

KERNELS = Path(__file__).resolve().parent / "kernels"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "validation_errors_expected: the test provokes Vulkan validation errors and checks them itself"
    )


@pytest.fixture(autouse=True)
def _fail_on_validation_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    from ironaccel_vulkan import validation

    validation.clear_errors()
    yield
    errors = validation.errors()
    validation.clear_errors()
    if errors and request.node.get_closest_marker("validation_errors_expected") is None:
        pytest.fail("Vulkan validation errors:\n" + "\n".join(str(e) for e in errors), pytrace=False)


@pytest.fixture(scope="session")
def scale_offset_spv() -> bytes:
    return (KERNELS / "scale_offset.spv").read_bytes()


@pytest.fixture(scope="session")
def axpy_int_spv() -> bytes:
    return (KERNELS / "axpy_int.spv").read_bytes()
