"""Linking (nvJitLink: CUBIN, PTX, LTO-IR, fatbin, the device runtime), Library loading, module globals."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FAKE
from helpers.cbuild import fatbinary as _fatbinary
from helpers.kernels import LINK_CALLEE as CALLEE
from helpers.kernels import LINK_CALLER as CALLER

import ironaccel_cuda as cu
from ironaccel import ClosedError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")

GLOBALS = r"""
__constant__ float coeffs[4];
__device__ unsigned counter;
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = a * x[i] * coeffs[i % 4] + y[i]; atomicAdd(&counter, 1u); }
}
"""


def _nvjitlink():
    from ironaccel_cuda import linker

    try:
        linker._nvjitlink()
    except Exception as exc:
        pytest.skip(f"nvJitLink is not installed: {exc}")


def _run_saxpy(dev, fn, a=1.0):
    n = 1000
    x = np.arange(n, dtype=np.float32)
    dx, dy = dev.alloc(n, "float32"), dev.alloc(n, "float32")
    dx.copy_from(x)
    dy.memset(0)
    fn.launch(4, 256, a, dx, dy, n)
    y = dy.copy_to_host()
    dx.close()
    dy.close()
    return x, y


@pytest.mark.skipif(FAKE, reason="the fake driver cannot run linked device functions")
@pytest.mark.parametrize("callee_kind", ["cubin", "ptx", "ltoir", "fatbin"])
def test_link_and_run(dev, callee_kind, tmp_path):
    _nvjitlink()
    rdc = cu.CompileOptions(relocatable_device_code=True)
    caller = cu.Program(CALLER, rdc).compile("ltoir" if callee_kind == "ltoir" else "cubin", arch=dev)
    if callee_kind == "fatbin":
        tool = _fatbinary()
        if tool is None:
            pytest.skip("no fatbinary tool to build a fatbin with")
        import subprocess

        cubin = tmp_path / "callee.cubin"
        cubin.write_bytes(cu.Program(CALLEE, rdc).compile("cubin", arch=dev))
        major, minor = dev.compute_capability
        fat = tmp_path / "callee.fatbin"
        subprocess.run([tool, "--64", f"--create={fat}", f"--image3=kind=elf,sm={major}{minor},file={cubin}"],
                       check=True)
        callee = fat
    else:
        callee = cu.Program(CALLEE, rdc).compile(callee_kind, arch=dev)
    code = cu.Linker(caller, callee).link(arch=dev)
    assert code.kind == "cubin" and code.arch == dev.arch and bytes(code)[:4] == b"\x7fELF"
    mod = dev.load_module(code)
    x, y = _run_saxpy(dev, mod.function("saxpy"), 3.0)
    np.testing.assert_allclose(y, 6 * x)
    mod.close()
    again = cu.Linker(caller, callee).link(arch=dev)
    assert again.cache == "memory" and bytes(again) == bytes(code)


@pytest.mark.skipif(FAKE, reason="the fake driver cannot run linked device functions")
def test_link_with_the_device_runtime(dev):
    _nvjitlink()
    try:
        cu.linker.device_runtime_library()
    except cu.errors.NotAvailable as exc:
        pytest.fail(f"libcudadevrt.a is needed for dynamic parallelism and conditional graphs: {exc}")
    src = r"""
    extern "C" __global__ void child(unsigned* out) { out[threadIdx.x] = threadIdx.x + 1; }
    extern "C" __global__ void parent(unsigned* out) { if (threadIdx.x == 0) child<<<1, 32>>>(out); }
    """
    code = cu.Program(src, cu.CompileOptions(relocatable_device_code=True)).compile("cubin", arch=dev)
    linked = cu.Linker(code, device_runtime=True).link(arch=dev)
    mod = dev.load_module(linked)
    out = dev.alloc(32, "uint32")
    out.memset(0)
    mod.function("parent").launch(1, 1, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(1, 33, dtype=np.uint32))
    out.close()
    mod.close()


def test_link_bad_input(dev, kernel_code):
    _nvjitlink()
    with pytest.raises(InvalidArgument):
        cu.Linker()
    with pytest.raises(InvalidArgument):
        cu.Linker(b"\x7fELF\x02\x01\x01" + bytes(20))  # a truncated CUBIN never reaches nvJitLink
    with pytest.raises(InvalidArgument):
        cu.Linker(42)
    other = "sm_80" if dev.arch != "sm_80" else "sm_90"
    foreign = cu.Program(CALLEE, cu.CompileOptions(relocatable_device_code=True)).compile("cubin", arch=other)
    with pytest.raises(InvalidArgument) as info:
        cu.Linker(kernel_code, foreign).link(arch=dev)  # objects of different architectures
    assert "architecture" in str(info.value)
    with pytest.raises(InvalidArgument):
        cu.Linker(kernel_code).link("ptx", arch=dev)  # PTX output needs LTO
    with pytest.raises(cu.errors.CompileError) as info:
        cu.Linker(cu.Program(CALLER, cu.CompileOptions(relocatable_device_code=True)).compile("ltoir", arch=dev)
                  ).link(arch=dev)  # `scale` is defined nowhere
    assert info.value.op == "nvJitLinkComplete" and "scale" in info.value.log


def test_ltoir_cannot_be_loaded(dev):
    code = cu.Program(CALLEE).compile("ltoir", arch=dev)
    with pytest.raises(InvalidArgument) as info:
        dev.load_module(code)
    assert "link it first" in str(info.value)


def test_library_serves_every_device(dev, kernel_code):
    lib = cu.Library(kernel_code)
    fn = lib.function("saxpy", dev)
    assert fn is lib.function("saxpy", dev) and fn.param_layout() == ((0, 4), (8, 8), (16, 8), (24, 4))
    assert fn.attributes.max_threads_per_block >= 256
    x, y = _run_saxpy(dev, fn, 2.0)
    np.testing.assert_allclose(y, 2 * x)
    assert lib.function("templated::saxpy<float>", dev).name == "templated::saxpy<float>"
    for ordinal in range(1, 1 if FAKE else cu.device_count()):  # the fake's libraries are per context
        other = cu.Device(ordinal)
        x, y = _run_saxpy(other, lib.function("saxpy", other), 4.0)
        np.testing.assert_allclose(y, 4 * x)
    with pytest.raises(InvalidArgument):
        lib.function("no_such_kernel", dev)
    with pytest.raises(InvalidArgument):
        lib.get_global("no_such_global", dev)
    with pytest.raises(InvalidArgument):
        lib.function("saxpy", 0)
    lib.close()
    lib.close()
    with pytest.raises(ClosedError):
        fn.launch(1, 1, 1.0, 0, 0, 0)
    with pytest.raises(ClosedError):
        lib.function("saxpy", dev)


@pytest.mark.skipif(FAKE, reason="the fake driver gives every name a global block (fake_pycuda.c)")
def test_missing_global_is_typed(kernels):
    with pytest.raises(InvalidArgument) as info:
        kernels.get_global("no_such_global")
    assert info.value.op == "cuModuleGetGlobal" and "no_such_global" in str(info.value)
    with pytest.raises(InvalidArgument):
        kernels.get_global("")


@pytest.mark.skipif(FAKE, reason="the fake driver has no module globals")
def test_module_and_library_globals(dev):
    code = cu.Program(GLOBALS).compile("cubin", arch=dev)
    for holder in ("module", "library"):
        if holder == "module":
            owner = dev.load_module(code)
            coeffs, counter, fn = owner.get_global("coeffs", "float32"), owner.get_global("counter", "uint32"), \
                owner.function("saxpy")
        else:
            owner = cu.Library(code)
            coeffs, counter = owner.get_global("coeffs", dev, "float32"), owner.get_global("counter", dev, "uint32")
            fn = owner.function("saxpy", dev)
        assert coeffs.nbytes == 16 and coeffs.size == 4 and counter.nbytes == 4 and coeffs.ptr > 0
        coeffs.copy_from(np.array([1, 2, 3, 4], np.float32))
        counter.copy_from(np.zeros(1, np.uint32))
        x, y = _run_saxpy(dev, fn, 1.0)
        np.testing.assert_allclose(y, x * np.tile([1, 2, 3, 4], 250))
        assert counter.copy_to_host()[0] == 1000  # the kernel wrote it; the host reads it back
        np.testing.assert_array_equal(coeffs.copy_to_host(), [1, 2, 3, 4])
        with pytest.raises(InvalidArgument):
            (owner.get_global("counter", "float64") if holder == "module"
             else owner.get_global("counter", dev, "float64"))  # 4 bytes are not a float64
        owner.close()
        assert coeffs.closed and counter.closed
