"""Shared fixtures for the CPU tests: an isolated compile cache per test; the compiled hot path."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import compiled_build


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


@pytest.fixture(scope="session")
def compiled_path(tmp_path_factory) -> str | None:
    """None if `ironaccel_cuda._hotc` imports already; else the src folder of a copy built with it."""
    try:
        return compiled_build.pythonpath_with_compiled(tmp_path_factory.mktemp("hotc"))
    except compiled_build.Unbuildable as exc:
        if compiled_build.REQUIRE:
            pytest.fail(f"IRONACCEL_CUDA_REQUIRE_COMPILED=1 but the compiled hot path is unavailable: {exc}")
        pytest.skip(f"the compiled hot path is unavailable: {exc}")
