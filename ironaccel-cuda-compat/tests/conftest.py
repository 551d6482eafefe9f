"""Shared fixtures of the compat's tests: the cuda.core compat module (`cc`) and an isolated compile cache.

The compat's tests stand on ironaccel-cuda's test kit (the GPU suite's fixtures and kernels, the fake libcuda);
`CUDA_TESTS` is where that kit lives in this repository.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: ironaccel-cuda's tests folder (gpu/conftest.py, gpu/kernels.py, fakecuda/, test_fake_driver.py).
CUDA_TESTS = Path(__file__).resolve().parents[2] / "ironaccel-cuda" / "tests"


@pytest.fixture
def cc() -> Any:
    """The cuda.core compat module, imported by the test that asks for it (never at collection)."""
    from ironaccel_cuda_compat import cuda_core

    return cuda_core


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
