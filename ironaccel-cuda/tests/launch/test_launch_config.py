"""Launch attributes (LaunchConfig: cooperative, clusters, programmatic serialization, priority) and prepared
launches (Function.prepare): results, reuse, and the typed errors of bad configurations."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FAKE

import ironaccel_cuda as cu
from ironaccel import ClosedError, DriverError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")

CLUSTER_SOURCE = r"""
// Each block writes how many blocks its cluster has and its rank inside it (sm_90 special registers).
extern "C" __global__ void cluster_shape(unsigned* out) {
    unsigned n, rank;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    if (threadIdx.x == 0) { out[2 * blockIdx.x] = n; out[2 * blockIdx.x + 1] = rank; }
}

// A grid-wide barrier by hand: every block arrives, then waits for all -- it only finishes when every block of
// the grid is resident at once, which a cooperative launch guarantees.
extern "C" __global__ void grid_barrier(unsigned* counter, unsigned* out) {
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(counter, 1u);
        while (atomicAdd(counter, 0u) < gridDim.x) { }
        out[blockIdx.x] = atomicAdd(counter, 0u);
    }
}
"""


@pytest.fixture
def cluster_kernels(dev):
    if dev.compute_capability < (9, 0):
        pytest.skip("thread-block clusters need compute capability 9.0")
    mod = dev.load_module(cu.Program(CLUSTER_SOURCE).compile("cubin", arch=dev))
    yield mod
    mod.close()


def test_config_validation():
    cfg = cu.LaunchConfig(cooperative=True, cluster=(2, 1), priority=-1, programmatic_serialization=True,
                          cluster_scheduling="spread", preferred_cluster=(4, 1, 1))
    assert cfg.cluster == (2, 1, 1) and cfg.preferred_cluster == (4, 1, 1) and cfg.cooperative
    assert "cluster=(2, 1, 1)" in repr(cfg)
    assert cu.LaunchConfig().cluster is None
    for bad in ({"cluster": 0}, {"cluster": (2, 0)}, {"cluster": "2"}, {"cluster": (1, 2, 3, 4)},
                {"cooperative": 1}, {"priority": 1.5}, {"priority": True}, {"cluster_scheduling": "fast"},
                {"non_portable_cluster": True}, {"cluster": 2, "preferred_cluster": 3},
                {"preferred_cluster": 2}, {"cluster": 1 << 32}, {"cluster": 4, "preferred_cluster": (1 << 34, 1)}):
        with pytest.raises(InvalidArgument):
            cu.LaunchConfig(**bad)
    with pytest.raises(TypeError):
        cu.LaunchConfig(2)


def test_plain_kernel_with_attributes(dev, kernels):
    fn = kernels.function("saxpy")
    x = dev.alloc(256, "float32")
    y = dev.alloc(256, "float32")
    x.copy_from(np.arange(256, dtype=np.float32))
    for cfg in (cu.LaunchConfig(), cu.LaunchConfig(priority=-1), cu.LaunchConfig(programmatic_serialization=True),
                cu.LaunchConfig(cooperative=True)):
        y.memset(0)
        fn.launch(4, 64, np.float32(2.0), x, y, np.uint32(256), config=cfg)
        np.testing.assert_array_equal(y.copy_to_host(), 2 * np.arange(256, dtype=np.float32))
    with pytest.raises(TypeError):
        fn.launch(4, 64, np.float32(2.0), x, y, np.uint32(256), config="cooperative")
    x.close()
    y.close()


def test_cooperative_grid_larger_than_resident_blocks(dev, kernels):
    fn = kernels.function("saxpy")
    x = dev.alloc(64, "float32")
    too_many = dev.attributes.multiprocessor_count * 64 + 1  # more than can ever be resident at 1024 threads
    with pytest.raises(DriverError) as info:
        fn.launch(too_many, 1024, np.float32(1.0), x, x, np.uint32(0), config=cu.LaunchConfig(cooperative=True))
    assert info.value.op == "cuLaunchKernelEx" and info.value.code == 720  # COOPERATIVE_LAUNCH_TOO_LARGE
    dev.default_stream.synchronize()  # the context is still usable
    x.close()


@pytest.mark.skipif(FAKE, reason="the fake driver runs only its built-in kernels")
def test_cooperative_grid_wide_barrier(dev, cluster_kernels):
    fn = cluster_kernels.function("grid_barrier")
    blocks = dev.attributes.multiprocessor_count * max(1, fn.max_active_blocks_per_sm(128))
    counter = dev.alloc(1, "uint32")
    out = dev.alloc(blocks, "uint32")
    counter.memset(0)
    fn.launch(blocks, 128, counter, out, config=cu.LaunchConfig(cooperative=True))
    assert (out.copy_to_host() == blocks).all()
    counter.close()
    out.close()


@pytest.mark.skipif(FAKE, reason="the fake driver runs only its built-in kernels")
@pytest.mark.parametrize("cluster", [1, 2, 4, 8])
def test_clusters(dev, cluster_kernels, cluster):
    fn = cluster_kernels.function("cluster_shape")
    grid = 32
    out = dev.alloc(2 * grid, "uint32")
    fn.launch(grid, 32, out, config=cu.LaunchConfig(cluster=cluster))
    got = out.copy_to_host().reshape(grid, 2)
    assert (got[:, 0] == cluster).all()
    assert sorted(got[:, 1]) == sorted(list(range(cluster)) * (grid // cluster))
    out.close()


@pytest.mark.skipif(FAKE, reason="the fake driver runs only its built-in kernels")
def test_non_portable_cluster_needs_opting_in(dev, cluster_kernels):
    fn = cluster_kernels.function("cluster_shape")
    out = dev.alloc(64, "uint32")
    with pytest.raises(DriverError) as info:  # 16 blocks per cluster: above the portable 8
        fn.launch(32, 32, out, config=cu.LaunchConfig(cluster=16))
    assert info.value.op == "cuLaunchKernelEx"
    fn.launch(32, 32, out, config=cu.LaunchConfig(cluster=16, non_portable_cluster=True))
    assert (out.copy_to_host().reshape(32, 2)[:, 0] == 16).all()
    out.close()


def test_grid_not_a_multiple_of_the_cluster(dev, kernels):
    fn = kernels.function("saxpy")
    x = dev.alloc(64, "float32")
    with pytest.raises(DriverError) as info:
        fn.launch(3, 32, np.float32(1.0), x, x, np.uint32(0), config=cu.LaunchConfig(cluster=2))
    assert info.value.op == "cuLaunchKernelEx"
    dev.default_stream.synchronize()
    x.close()


def test_prepared_launch(dev, kernels):
    fn = kernels.function("saxpy")
    n = 1024
    x = dev.alloc(n, "float32")
    y = dev.alloc(n, "float32")
    x.copy_from(np.ones(n, np.float32))
    y.memset(0)
    p = fn.prepare(n // 128, 128, np.float32(2.0), x, y, np.uint32(n))
    assert isinstance(p, cu.PreparedLaunch) and p.args[1] is x
    for _ in range(3):
        p()
    np.testing.assert_array_equal(y.copy_to_host(), np.full(n, 6, np.float32))
    # a plain launch of the same function with other values does not disturb the prepared block
    fn.launch(n // 128, 128, np.float32(100.0), x, y, np.uint32(n))
    p()
    np.testing.assert_array_equal(y.copy_to_host(), np.full(n, 108, np.float32))
    p.set_args(np.float32(-1.0), x, y, np.uint32(n))
    p()
    np.testing.assert_array_equal(y.copy_to_host(), np.full(n, 107, np.float32))
    with pytest.raises(InvalidArgument):
        p.set_args(2.0, x, y, np.uint32(n))  # a Python float where a float32 was prepared
    with pytest.raises(InvalidArgument):
        p.set_args(np.float32(1.0), x, y)
    with pytest.raises(TypeError):
        cu.PreparedLaunch()
    y.close()
    with pytest.raises(ClosedError):
        p()
    x.close()


def test_prepared_launch_on_a_stream_with_config(dev, kernels):
    fn = kernels.function("saxpy")
    s = dev.create_stream()
    x = dev.alloc(64, "float32")
    y = dev.alloc(64, "float32")
    x.copy_from(np.ones(64, np.float32))
    y.memset(0, stream=s)
    p = fn.prepare(1, 64, np.float32(3.0), x, y, np.uint32(64), stream=s, config=cu.LaunchConfig(priority=-1))
    p()
    s.synchronize()
    np.testing.assert_array_equal(y.copy_to_host(), np.full(64, 3, np.float32))
    s.close()
    with pytest.raises(ClosedError):
        p()
    with pytest.raises(ClosedError):
        fn.prepare(1, 64, np.float32(3.0), x, y, np.uint32(64), stream=s)
    with pytest.raises(InvalidArgument):
        fn.prepare(1, 64, np.float32(3.0), x, y)  # too few arguments for the kernel
    x.close()
    y.close()


def test_prepared_launch_of_a_closed_module(dev, kernel_code):
    mod = dev.load_module(kernel_code)
    fn = mod.function("saxpy")
    x = dev.alloc(64, "float32")
    p = fn.prepare(1, 64, np.float32(1.0), x, x, np.uint32(64))
    mod.close()
    with pytest.raises(ClosedError):
        p()
    x.close()
