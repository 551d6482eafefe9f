"""The ROCm suite against the fake libamdhip64 (ironaccel-rocm/fake_tests), in its own pytest process.

hip-python loads ``$ROCM_PATH/lib/libamdhip64.so`` once per process, and this process may already have the
real one (test_probe), so the fake suite runs in a child whose conftest builds the fake from ROCm's headers
and points ROCM_PATH at it.  IRONACCEL_REQUIRE=rocm there: a skip in the child is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ironaccel.testing import cbuild

FAKE_TESTS = Path(__file__).resolve().parent.parent / "fake_tests"
HEADER = Path("/usr/include/hip/hip_runtime_api.h")


def _hip_python() -> bool:
    try:
        import hip  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _hip_python(), reason="needs hip-python (pip install 'ironaccel-rocm[hip]')")
def test_rocm_suite_against_the_fake_driver() -> None:
    reason = cbuild.missing([HEADER])
    if reason is not None:
        pytest.skip(f"the fake libamdhip64 {reason} (apt-get install libamdhip64-dev)")
    env = {**os.environ, "IRONACCEL_REQUIRE": "rocm"}
    done = subprocess.run([sys.executable, "-m", "pytest", "--import-mode=importlib", "-q", "-rs", "-p",
                           "no:cacheprovider", str(FAKE_TESTS)], capture_output=True, text=True, env=env,
                          timeout=300)
    summary = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
    assert done.returncode == 0, f"fake ROCm suite failed: {summary[0]}\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    assert " passed" in summary[0] and "skipped" not in summary[0], summary[0]
