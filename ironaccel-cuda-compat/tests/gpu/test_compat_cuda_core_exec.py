"""The cuda.core compat's linking and occupancy on a device: Linker, PTX programs, LTO-IR, KernelOccupancy.

Linked kernels are launched and their results checked: a kernel whose device function
lives in another translation unit only runs right if the link resolved it.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from conftest import FAKE

pytestmark = pytest.mark.backend("cuda")

N = 64
KERNEL = r"""
extern __device__ float axpy_step(float a, float x, float y);
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = axpy_step(a, x[i], y[i]);
}
"""
STEP = "__device__ float axpy_step(float a, float x, float y) { return a * x + y; }"

LAYOUT = ("e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-"
          "v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64")


def run_saxpy(cc, device, stream, kernel):
    """y = 2x + 1 through `kernel`, returned to the host."""
    pinned = cc.LegacyPinnedMemoryResource()
    hx, hy = pinned.allocate(N * 4), pinned.allocate(N * 4)
    np.from_dlpack(hx).view(np.float32)[:] = np.arange(N, dtype=np.float32)
    y = np.from_dlpack(hy).view(np.float32)
    y[:] = 1.0
    dx, dy = device.allocate(N * 4, stream=stream), device.allocate(N * 4, stream=stream)
    dx.copy_from(hx, stream=stream)
    dy.copy_from(hy, stream=stream)
    cc.launch(stream, cc.LaunchConfig(grid=(N + 31) // 32, block=32), kernel, np.float32(2), dx, dy, np.uint32(N))
    dy.copy_to(hy, stream=stream)
    stream.sync()
    out = y.copy()
    for b in (dx, dy):
        b.close(stream)
    for h in (hx, hy):
        h.close()
    return out


@pytest.mark.parametrize("target", ["ptx", "ltoir"])
def test_linker_resolves_device_functions_across_programs(cc, device, stream, target):
    arch = f"sm_{device.arch}"
    lto = target == "ltoir"
    opts = cc.ProgramOptions(arch=arch, relocatable_device_code=True, link_time_optimization=lto or None)
    pieces = [cc.Program(src, "c++", opts).compile(target) for src in (KERNEL, STEP)]
    assert all(p.code_type == target for p in pieces)
    linker = cc.Linker(*pieces, options=cc.LinkerOptions(name="linked", arch=arch, link_time_optimization=lto))
    assert cc.Linker.which_backend() == "nvJitLink" and linker.handle != 0
    code = linker.link("cubin")
    assert code.code_type == "cubin" and code.name == "linked" and code.code[:4] == b"\x7fELF"
    assert isinstance(linker.get_info_log(), str)
    linker.close()
    linker.close()
    np.testing.assert_allclose(run_saxpy(cc, device, stream, code.get_kernel("saxpy")), 2 * np.arange(N) + 1)


def test_link_errors_keep_the_log(cc, device):
    arch = f"sm_{device.arch}"
    from cuda.bindings.nvjitlink import nvJitLinkError

    alone = cc.Program(KERNEL, "c++", cc.ProgramOptions(arch=arch, relocatable_device_code=True)).compile("ptx")
    linker = cc.Linker(alone, options=cc.LinkerOptions(arch=arch))
    with pytest.raises(nvJitLinkError):
        linker.link("cubin")
    assert "axpy_step" in linker.get_error_log()
    linker.close()
    assert "axpy_step" in linker.get_error_log()
    with pytest.raises(nvJitLinkError):
        cc.Linker(alone, options=cc.LinkerOptions(arch="99"))


def test_ptx_program_is_linked_to_cubin(cc, device, stream):
    arch = f"sm_{device.arch}"
    whole = KERNEL.replace("extern __device__ float axpy_step(float a, float x, float y);", STEP)
    ptx = cc.Program(whole, "c++", cc.ProgramOptions(arch=arch)).compile("ptx")
    program = cc.Program(ptx.code.decode(), "ptx", cc.ProgramOptions(name="from_ptx", arch=arch))
    assert program.backend == "nvJitLink" and int(program.handle) != 0
    cubin = program.compile("cubin")
    assert cubin.code_type == "cubin" and cubin.name == "from_ptx" and cubin.code[:4] == b"\x7fELF"
    program.close()
    np.testing.assert_allclose(run_saxpy(cc, device, stream, cubin.get_kernel("saxpy")), 2 * np.arange(N) + 1)


def test_ltoir_cannot_be_loaded(cc, device):
    code = cc.Program(STEP, "c++", cc.ProgramOptions(arch=f"sm_{device.arch}", link_time_optimization=True)
                      ).compile("ltoir")
    assert code.code_type == "ltoir" and len(code.code) > 0
    with pytest.raises(RuntimeError, match='Unsupported code type "ltoir"'):
        code.get_kernel("saxpy")


def test_occupancy_queries(cc, device, stream):
    whole = KERNEL.replace("extern __device__ float axpy_step(float a, float x, float y);", STEP)
    kernel = cc.Program(whole, "c++").compile("cubin").get_kernel("saxpy")
    occ = kernel.occupancy
    props = device.properties
    grid, block = occ.max_potential_block_size(0, 0)
    assert grid > 0 and 0 < block <= props.max_threads_per_block
    limited = occ.max_potential_block_size(256, 64)
    assert limited.max_block_size <= 64 and limited.min_grid_size > 0
    with pytest.raises(TypeError):
        occ.max_potential_block_size(1.5, 0)
    asked = []

    @ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_int)
    def per_block(size):
        asked.append(size)
        return 16 * size

    from cuda.bindings import driver

    fn_ptr = ctypes.cast(per_block, ctypes.c_void_p).value
    grid2, block2 = occ.max_potential_block_size(driver.CUoccupancyB2DSize(_ptr=fn_ptr), 256)  # as cuda.core takes it
    assert asked and grid2 > 0 and 0 < block2 <= 256
    smem = occ.available_dynamic_shared_memory_per_block(2, 128)
    assert 0 < smem and 2 * smem <= props.max_shared_memory_per_multiprocessor
    assert occ.max_active_blocks_per_multiprocessor(128, 0) >= 1
    if device.compute_capability >= (9, 0):
        config = cc.LaunchConfig(grid=16, block=128)
        assert occ.max_potential_cluster_size(config, stream=stream) >= 1
        clustered = cc.LaunchConfig(grid=8, block=128, cluster=2)
        assert occ.max_active_clusters(clustered, stream=stream) >= 1
    with pytest.raises(TypeError, match="keyword-only"):
        occ.max_active_clusters(cc.LaunchConfig(grid=16, block=128))  # type: ignore[call-arg]


@pytest.mark.skipif(FAKE, reason="the fake driver has no NVVM-made kernels to find by name")
def test_nvvm_ir_compiles_to_a_loadable_kernel(cc, device):
    from ironaccel_cuda_compat.cuda_core._program import _get_nvvm_module

    nvvm = _get_nvvm_module()
    major, minor, dmajor, dminor = nvvm.ir_version()
    ir = f"""target triple = "nvptx64-unknown-cuda"
target datalayout = "{LAYOUT}"

define void @touch(i32* %p) {{
entry:
  store i32 7, i32* %p, align 4
  ret void
}}

!nvvm.annotations = !{{!0}}
!0 = !{{void (i32*)* @touch, !"kernel", i32 1}}
!nvvmir.version = !{{!1}}
!1 = !{{i32 {major}, i32 {minor}, i32 {dmajor}, i32 {dminor}}}
"""
    program = cc.Program(ir, "nvvm", cc.ProgramOptions(name="ir", arch=f"sm_{device.arch}"))
    assert program.backend == "NVVM" and program.handle
    ptx = program.compile("ptx")
    assert ptx.name == "ir" and b".entry touch" in ptx.code
    assert ptx.get_kernel("touch").num_arguments == 1
    program.close()


def test_handles_are_a_library_and_its_kernels_as_in_cuda_core(cc, device, stream):
    # cuda.core 1.2 loads with cuLibraryLoadData: ObjectCode.handle is a CUlibrary and Kernel.handle a CUkernel,
    # which cuKernelSetAttribute / cuKernelSetCacheConfig / cuLibraryGetKernel take.  A CUmodule / CUfunction
    # there once failed with CUDA_ERROR_INVALID_HANDLE.
    from cuda.bindings import driver

    src = KERNEL.replace("extern __device__ float axpy_step(float a, float x, float y);", STEP)
    code = cc.Program(src, "c++", cc.ProgramOptions(arch=f"sm_{device.arch}")).compile("cubin")
    kernel = code.get_kernel("saxpy")
    lib, kern = code.handle, kernel.handle
    assert isinstance(lib, driver.CUlibrary) and int(lib) != 0
    assert isinstance(kern, driver.CUkernel) and int(kern) != 0
    err, again = driver.cuLibraryGetKernel(lib, b"saxpy")
    assert err == driver.CUresult.CUDA_SUCCESS and int(again) == int(kern)
    cudev = driver.CUdevice(device.device_id)
    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    assert driver.cuKernelSetAttribute(attr, 2048, kern, cudev)[0] == driver.CUresult.CUDA_SUCCESS
    if not FAKE:  # the fake keeps no per-kernel attributes
        assert kernel.attributes.max_dynamic_shared_size_bytes == 2048
    prefer = driver.CUfunc_cache.CU_FUNC_CACHE_PREFER_SHARED
    assert driver.cuKernelSetCacheConfig(kern, prefer, cudev)[0] == driver.CUresult.CUDA_SUCCESS
    module = code.get_module()  # the legacy bridge: a CUmodule of the current context
    assert isinstance(module, driver.CUmodule)
    err, fn = driver.cuModuleGetFunction(module, b"saxpy")
    assert err == driver.CUresult.CUDA_SUCCESS and int(fn) != 0
    assert cc.Kernel.from_handle(int(kern)) == kernel and cc.Kernel.from_handle(int(kern))._code is code
    assert repr(code) == f"<ObjectCode handle={int(lib):#x} code_type='cubin'>"
    # The CUkernel launches through the same path a module's function did.
    assert (run_saxpy(cc, device, stream, kernel) == 2 * np.arange(N, dtype=np.float32) + 1).all()
