"""Shared fixtures: an isolated compile cache per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


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
