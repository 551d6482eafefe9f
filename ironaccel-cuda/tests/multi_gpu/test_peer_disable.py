"""Disabling peer access (Device.disable_peer_access, cuCtxDisablePeerAccess) and its error paths.

The two-device tests are marked multi_gpu (skipped on one GPU, failed when IRONACCEL_REQUIRE names multi_gpu);
the fake driver has two devices, so CI runs them there too.
"""

from __future__ import annotations

import numpy as np
import pytest

import ironaccel
from ironaccel import ClosedError, InvalidArgument


@pytest.mark.backend("cuda")
def test_a_device_cannot_disable_access_to_itself(dev):
    with pytest.raises(InvalidArgument, match="cuCtxDisablePeerAccess.*always accesses its own memory"):
        dev.disable_peer_access(dev)
    with pytest.raises(InvalidArgument, match="cuCtxDisablePeerAccess"):
        dev.disable_peer_access(dev.ordinal)


@pytest.fixture(scope="module")
def saxpy_code():
    from helpers.kernels import SOURCE

    import ironaccel_cuda as cu

    if not ironaccel.probe("cuda").available:
        pytest.skip("backend cuda unavailable")
    return cu.Program(SOURCE).compile()


def _pool_access(owner, device) -> int:
    """How `device` may use `owner`'s default stream-ordered pool (CUmemAccess_flags as an int)."""
    from ironaccel_cuda._driver import call, driver

    drv = driver()
    loc = drv.CUmemLocation()
    loc.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    loc.id = device.ordinal
    return int(call("cuMemPoolGetAccess", call("cuDeviceGetDefaultMemPool", owner._state.cudev), loc))


@pytest.mark.multi_gpu
def test_disable_peer_access_closes_the_path_again(two, saxpy_code):
    d0, d1 = two
    if not d0.can_access_peer(d1):
        pytest.skip("cuda:0 has no peer path to cuda:1")
    fn = d0.load_module(saxpy_code).function("saxpy")
    buf0, buf1 = d0.alloc(256, "float32"), d1.alloc(256, "float32")
    buf0.copy_from(np.ones(256, np.float32))
    d0.enable_peer_access(d1)
    buf1.memset(0)
    fn.launch(1, 256, 2.0, buf0, buf1, 256)  # peer memory allowed
    d0.synchronize()
    np.testing.assert_array_equal(buf1.copy_to_host(), np.full(256, 2, np.float32))

    d0.disable_peer_access(d1)
    with pytest.raises(InvalidArgument, match="enable_peer_access"):
        fn.launch(1, 256, 2.0, buf0, buf1, 256)  # refused before the driver: not reachable any more
    assert _pool_access(d1, d0) == 0  # CU_MEM_ACCESS_FLAGS_PROT_NONE: the peer's pool closed again
    with pytest.raises(InvalidArgument) as info:  # the driver's own state: nothing left to disable
        d0.disable_peer_access(1)
    assert info.value.op == "cuCtxDisablePeerAccess" and info.value.code == 705
    assert "no peer access to cuda:1" in str(info.value)

    d0.enable_peer_access(d1)  # and on again
    fn.launch(1, 256, 3.0, buf0, buf1, 256)
    d0.synchronize()
    np.testing.assert_array_equal(buf1.copy_to_host(), np.full(256, 5, np.float32))
    d0.disable_peer_access(d1)
    fn.module.close()
    for x in (buf0, buf1):
        x.close()


@pytest.mark.multi_gpu
def test_disable_peer_access_error_paths(two):
    import ironaccel_cuda as cu

    d0, d1 = two
    d0.enable_peer_access(d1)
    d0.disable_peer_access(d1)
    with pytest.raises(InvalidArgument) as info:  # never re-enabled
        d0.disable_peer_access(d1)
    assert info.value.code == 705 and info.value.code_name == "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"
    closed = cu.Device(0)
    closed.close()
    with pytest.raises(ClosedError, match="cuCtxDisablePeerAccess"):
        closed.disable_peer_access(d1)
