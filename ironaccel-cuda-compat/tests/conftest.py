"""Shared fixtures of the compat's tests: the cuda.core compat module (`cc`) and an isolated compile cache.

The compat's tests stand on ironaccel-cuda's test kit (the GPU suite's fixtures and kernels, the fake libcuda);
`CUDA_TESTS` is where that kit lives in this repository.  It goes on sys.path here, so the kit imports as
ironaccel-cuda's `helpers` package (`helpers.fixtures`, `helpers.kernels`, `helpers.fakes`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: ironaccel-cuda's tests folder (helpers/fixtures.py, helpers/kernels.py, helpers/fakes.py, fakecuda/).
CUDA_TESTS = Path(__file__).resolve().parents[2] / "ironaccel-cuda" / "tests"
if str(CUDA_TESTS) not in sys.path:
    sys.path.insert(0, str(CUDA_TESTS))


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
