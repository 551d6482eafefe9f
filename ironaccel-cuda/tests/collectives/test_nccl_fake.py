"""The NCCL GPU tests on the CPU: collectives/test_nccl*.py against the fake libcuda and a fake libnccl.

tests/fakenccl/fake_nccl.c answers the NCCL calls nccl4py makes (preloaded, so it wins over any
real libnccl), running every rank of a clique in one process over the fake driver's host memory.
This runs the real nccl4py binding and ironaccel's wrapper end to end -- argument conversions,
communicator creation in both models, every collective in one process with two fake GPUs, split,
registration, typed errors, the timeout and abort paths.  It proves the Python
layers, not NCCL: the same files must pass on real GPUs.  It is CI's job: on a machine with a CUDA
driver it skips (the GPU run covers these files for real).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.fakes import _env, _pytest, fake_lib, fake_nccl  # noqa: F401  (fixtures)

import ironaccel

HERE = Path(__file__).parent
ALLOWED_SKIPS = (
    "the fake driver has no cuMemCreate",  # VMM and pool buffers: real hardware only
    "the fake NCCL runs every rank in one process",  # process-per-GPU and hung-GPU tests
)

pytestmark = pytest.mark.skipif(ironaccel.probe("cuda").available, reason="a real CUDA driver is here: the GPU "
                                "run covers collectives/test_nccl*.py; the fake NCCL run is CI's job")


def test_nccl_suites_against_the_fakes(fake_lib, fake_nccl, tmp_path):  # noqa: F811
    pytest.importorskip("nccl.bindings.nccl", reason="nccl4py is not installed (pip install 'ironaccel-cuda[nccl]')")
    env = _env(fake_lib, tmp_path, IRONACCEL_FAKE_NCCL="1", LD_PRELOAD=str(fake_nccl),
               IRONACCEL_TEST_HANG_TIMEOUT="1")
    env["LD_LIBRARY_PATH"] = os.pathsep.join((str(fake_nccl.parent), env["LD_LIBRARY_PATH"]))
    files = ("test_nccl.py", "test_nccl_multi.py", "test_nccl_faults.py")
    out = _pytest([str(HERE / name) for name in files], env)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-8000:]
    summary = out.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
    skips = [line for line in out.stdout.splitlines() if line.startswith("SKIPPED")]
    unexpected = [line for line in skips if not any(reason in line for reason in ALLOWED_SKIPS)]
    assert not unexpected, "\n".join(unexpected)
    passed = int(summary.split(" passed")[0].split()[-1])
    assert passed >= 18, summary
