"""The compat's GPU suite on the CPU, against ironaccel-cuda's fake libcuda.so.1 (tests/fakecuda there).

There is one fake driver for the library and the compat: its fake_compat_*.c and fake_pycuda.c implement
entry points both call.  ironaccel-cuda's tests/helpers/fakes.py builds it and sets the environment; this file
reuses those helpers and runs tests/gpu here.  It proves the Python and C layers, not the GPU.
"""

from __future__ import annotations

from pathlib import Path

import helpers.fakes as _kit  # ironaccel-cuda's fake-driver kit (its tests/ is on sys.path: conftest.py)

HERE = Path(__file__).parent
fake_lib = _kit.fake_lib  # the fixture: the fake libcuda, built once per module


def test_compat_gpu_suite_against_the_fake_driver(fake_lib, tmp_path):
    _kit._passed(_kit._pytest([str(HERE / "gpu")], _kit._env(fake_lib, tmp_path)))
