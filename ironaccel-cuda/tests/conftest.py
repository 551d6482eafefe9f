"""Shared fixtures: an isolated compile cache per test, and the GPU suite's fixtures and hooks for every folder.

tests/ goes on sys.path here, so that test modules, spawned children and ironaccel-cuda-compat's tests import
the shared code as the `helpers` package (tests/helpers) under either pytest import mode.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from helpers.fixtures import (  # noqa: F401  (the GPU suite's fixtures and hooks, for every folder)
    dev,
    fn,
    kernel_code,
    kernels,
    pytest_configure,
    pytest_runtest_protocol,
    pytest_runtest_setup,
    pytest_sessionfinish,
    two,
    wait_until,
)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh on-disk cache folder and an empty in-memory cache."""
    from ironaccel_cuda import cache

    folder = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV_CACHE_DIR, str(folder))
    monkeypatch.delenv(cache.ENV_CACHE, raising=False)
    cache.clear_memory()
    yield folder
    cache.clear_memory()
