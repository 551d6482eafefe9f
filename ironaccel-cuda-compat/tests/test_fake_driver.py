"""The compat's GPU suite on the CPU, against ironaccel-cuda's fake libcuda.so.1 (tests/fakecuda there).

There is one fake driver for the library and the compat: its fake_compat_*.c and fake_pycuda.c implement
entry points both call.  ironaccel-cuda's test_fake_driver.py builds it and sets the environment; this file
reuses those helpers and runs tests/gpu here.  It proves the Python and C layers, not the GPU.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).parent
_CUDA_TESTS = HERE.parents[1] / "ironaccel-cuda" / "tests"


def _cuda_fake_driver():  # -> module
    name = "ironaccel_cuda_test_fake_driver"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _CUDA_TESTS / "test_fake_driver.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_kit = _cuda_fake_driver()
fake_lib = _kit.fake_lib  # the fixture: the fake libcuda, built once per module


def test_compat_gpu_suite_against_the_fake_driver(fake_lib, tmp_path):
    _kit._passed(_kit._pytest([str(HERE / "gpu")], _kit._env(fake_lib, tmp_path)))
