"""NCCL on several GPUs, in both process models: every collective against numpy, split, send/recv, a hung peer.

Marked `multi_gpu` (not for the backend, as test_multi_gpu.py): on fewer than two GPUs these skip,
and fail instead only when IRONACCEL_REQUIRE names multi_gpu.  The one-process tests use all the
GPUs of the machine (at most 8); the process-per-GPU tests start one worker per GPU with
torchrun's variables and NCCL_NVLS_ENABLE=0.  Against the fake NCCL (one process,
test_nccl_fake.py) only the one-process collectives and split run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FAKE
from helpers.nccl_checks import HANG_TIMEOUT, exercise, exercise_split, launch

import ironaccel
from ironaccel.testing.pytest_plugin import ENV_REQUIRE, required_backends

FAKE_NCCL = os.environ.get("IRONACCEL_FAKE_NCCL") == "1"

pytestmark = [
    pytest.mark.multi_gpu,
    pytest.mark.skipif(FAKE and not FAKE_NCCL, reason="NCCL needs GPUs here; test_nccl_fake.py runs this "
                       "file against the fake NCCL"),
]
EXAMPLE = Path(__file__).parents[2] / "examples" / "nccl_allreduce.py"
real_only = pytest.mark.skipif(FAKE, reason="the fake NCCL runs every rank in one process and never hangs a GPU")


@pytest.fixture(scope="module")
def nccl():
    from ironaccel_cuda import nccl as module

    try:
        module.version()
    except ironaccel.NotAvailable as exc:
        required = required_backends()
        if "cuda" in required or "*" in required or "multi_gpu" in required:
            pytest.fail(f"NCCL unavailable: {exc} (required by {ENV_REQUIRE})", pytrace=False)
        pytest.skip(f"NCCL unavailable: {exc}")
    return module


@pytest.fixture
def devices():
    import ironaccel_cuda as cu

    devs = [cu.Device(i) for i in range(min(cu.device_count(), 8))]
    yield devs
    for d in devs:
        d.close()


def test_one_process_every_collective(nccl, devices):
    comms = nccl.Communicator.init_all(devices, timeout=120)
    n = len(devices)
    assert [(c.rank, c.nranks, c.device.ordinal) for c in comms] == [(i, n, i) for i in range(n)]
    done = exercise(comms, n)
    assert len(done) >= 25, done
    nccl.close_all(comms)


def test_one_process_split(nccl, devices):
    comms = nccl.Communicator.init_all(devices, timeout=120)
    exercise_split(comms, len(devices))
    nccl.close_all(comms)


def test_one_process_subset_and_reverse_order(nccl, devices):
    """Ranks need not follow device ordinals: rank 0 on the last GPU."""
    import numpy as np

    order = list(reversed(devices[:2]))
    comms = nccl.Communicator.init_all(order, timeout=120)
    bufs = [c.device.alloc(1 << 16, "int32") for c in comms]
    for c, b in zip(comms, bufs):
        b.copy_from(np.full(1 << 16, c.rank + 10, np.int32))
    with nccl.group():
        for c, b in zip(comms, bufs):
            c.broadcast(b, root=1)
    for c in comms:
        c.synchronize()
    for b in bufs:
        np.testing.assert_array_equal(b.copy_to_host(), np.full(1 << 16, 11, np.int32))
        b.close()
    assert comms[0].device.ordinal == order[0].ordinal
    nccl.close_all(comms)


@real_only
def test_one_process_hung_peer_is_aborted_within_the_timeout(nccl, devices):
    (result,) = launch(1, "hang-one-process", timeout=180)
    assert result.returncode == 0 and "ok rank 0: timed out" in result.stdout, result.stdout[-4000:]
    _assert_prompt(result.stdout)


@real_only
def test_process_per_gpu_every_collective_and_split(nccl, devices):
    results = launch(len(devices), "collectives", timeout=420)
    for rank, r in enumerate(results):
        assert r.returncode == 0 and f"ok rank {rank}" in r.stdout, f"rank {rank}:\n{r.stdout[-4000:]}"


@real_only
def test_process_per_gpu_hung_peer_is_aborted_within_the_timeout(nccl, devices):
    results = launch(2, "hang", timeout=240)
    for rank, r in enumerate(results):
        assert r.returncode == 0 and f"ok rank {rank}" in r.stdout, f"rank {rank}:\n{r.stdout[-4000:]}"
    _assert_prompt(results[0].stdout)


@real_only
def test_the_example_on_every_gpu(nccl, devices):
    n = len(devices)
    out = subprocess.run([sys.executable, str(EXAMPLE), "-n", str(n)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert all(f"rank {r} of {n}" in out.stdout for r in range(n)) and f"ok on {n} GPU(s)" in out.stdout


def _assert_prompt(out: str) -> None:
    found = re.search(r"timed out after ([0-9.]+) s", out)
    assert found, out
    elapsed = float(found.group(1))
    assert HANG_TIMEOUT - 0.5 <= elapsed < HANG_TIMEOUT + 30, f"took {elapsed} s for a {HANG_TIMEOUT} s timeout"
