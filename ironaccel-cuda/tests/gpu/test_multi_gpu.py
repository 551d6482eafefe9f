"""Several GPUs: peer access and copies, cross-device checks.  Needs two devices.

Not marked for the backend on purpose: on a one-GPU machine these tests skip
(the reason says so) instead of failing under IRONACCEL_REQUIRE=cuda; the
cross-device checks themselves also run on one GPU (test_memory.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import ironaccel
from ironaccel import InvalidArgument


def test_enumerates_both(two):
    d0, d1 = two
    assert d0.uuid != d1.uuid and d0.pci_bus_id != d1.pci_bus_id


def test_peer_copy(two):
    d0, d1 = two
    data = np.random.default_rng(5).standard_normal(1 << 16).astype(np.float32)
    a = d0.upload(data)
    b = d1.alloc(data.size, "float32")
    b.copy_from(a)  # peer copy on b's stream
    np.testing.assert_array_equal(b.copy_to_host(), data)
    c = d0.alloc(data.size, "float32")
    s1 = d1.create_stream()
    c.copy_from(b, stream=s1)  # a stream of either side is fine
    s1.synchronize()
    np.testing.assert_array_equal(c.copy_to_host(), data)
    for x in (a, b, c):
        x.close()
    s1.close()


def test_cross_device_checks(two, kernel_code):
    d0, d1 = two
    buf1 = d1.alloc(256, "float32")
    s0 = d0.create_stream()
    with pytest.raises(InvalidArgument):
        buf1.copy_from(np.zeros(256, np.float32), stream=s0)
    with pytest.raises(InvalidArgument):
        d1.alloc(16, stream=s0)
    fn = d0.load_module(kernel_code).function("saxpy")
    buf0 = d0.alloc(256, "float32")
    with pytest.raises(InvalidArgument) as info:
        fn.launch(1, 256, 1.0, buf1, buf0, 256)  # cuda:1 memory in a cuda:0 kernel, no peer access
    assert "enable_peer_access" in str(info.value)
    s1 = d1.create_stream()
    with pytest.raises(InvalidArgument):
        fn.launch(1, 256, 1.0, buf0, buf0, 256, stream=s1)
    if d0.can_access_peer(d1):
        d0.enable_peer_access(d1)
        d0.enable_peer_access(d1)  # idempotent
        buf1.memset(0)
        buf0.copy_from(np.ones(256, np.float32))
        fn.launch(1, 256, 2.0, buf0, buf1, 256)  # now allowed: peer memory
        d0.synchronize()
        np.testing.assert_array_equal(buf1.copy_to_host(), np.full(256, 2, np.float32))
    for x in (buf0, buf1, s0, s1):
        x.close()


@pytest.fixture(scope="module")
def kernel_code():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from kernels import SOURCE

    import ironaccel_cuda as cu

    if not ironaccel.probe("cuda").available:
        pytest.skip("backend cuda unavailable")
    return cu.Program(SOURCE).compile()
