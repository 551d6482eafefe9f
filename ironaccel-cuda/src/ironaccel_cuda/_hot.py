"""The hot path: the compiled module `_hotc` when it was built, else the pure-Python `_hotpy`.

Both implement the contract written at the top of `_hotpy`.  Importing this
module replaces it in `sys.modules` with the chosen implementation, so
`from . import _hot` hands every caller the implementation itself (no
indirection on the hot path).  `_hot.DESCRIPTION` says which one and why;
`ironaccel_cuda.FAST_PATH` reports it.

* ``IRONACCEL_CUDA_PURE=1`` forces pure Python.
* ``IRONACCEL_CUDA_REQUIRE_COMPILED=1`` makes a missing compiled module an
  ImportError instead of a silent fallback (tests use it).

Neither implementation loads the CUDA driver when imported.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def _choose() -> tuple[ModuleType, str]:
    if _flag("IRONACCEL_CUDA_PURE"):
        from . import _hotpy

        return _hotpy, "pure Python (IRONACCEL_CUDA_PURE=1)"
    try:
        from . import _hotc
    except ImportError as exc:
        if _flag("IRONACCEL_CUDA_REQUIRE_COMPILED"):
            raise
        from . import _hotpy

        return _hotpy, f"pure Python (the compiled module is not available: {exc})"
    return _hotc, f"compiled ({os.path.basename(_hotc.__file__ or '_hotc')})"


_impl, _why = _choose()
_impl.DESCRIPTION = _why
sys.modules[__name__] = _impl
