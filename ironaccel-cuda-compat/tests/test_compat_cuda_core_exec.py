"""The cuda.core compat's compile and link paths without a GPU: NVRTC, nvJitLink and libNVVM are CPU libraries.

Linker / LinkerOptions on ironaccel's `linker.LinkSession`, PTX programs, LTO-IR, NVVM IR, and the
nvJitLink fallback for PTX newer than the driver.  Launches of linked kernels: tests/gpu/test_compat_cuda_core_exec.py.
"""

from __future__ import annotations

import warnings

import pytest

from ironaccel import ClosedError, CompileError

nvjitlink = pytest.importorskip("cuda.bindings.nvjitlink")
try:
    nvjitlink.version()
except Exception:  # pragma: no cover - the library is missing
    pytest.skip("libnvJitLink is not loadable", allow_module_level=True)

ARCH = "sm_90"
KERNEL = r"""
extern __device__ float step(float a, float x);
extern "C" __global__ void apply(float a, float* x) { x[threadIdx.x] = step(a, x[threadIdx.x]); }
"""
STEP = "__device__ float step(float a, float x) { return a * x; }"

LAYOUT = ("e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-"
          "v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64")


def rdc_ptx(cc, source):
    return cc.Program(source, "c++", cc.ProgramOptions(arch=ARCH, relocatable_device_code=True)).compile("ptx")


def test_link_session_keeps_logs_and_refuses_use_after_close():
    from ironaccel_cuda import Program
    from ironaccel_cuda.linker import LinkSession
    from ironaccel_cuda.options import CompileOptions

    rdc = CompileOptions(relocatable_device_code=True)
    a = Program(KERNEL, rdc).compile("ptx", arch=ARCH)
    b = Program(STEP, rdc).compile("ptx", arch=ARCH)
    session = LinkSession([f"-arch={ARCH}"])
    session.add("ptx", a.code, "a")
    session.add("ptx", b.code, "b")
    cubin = session.complete("cubin")
    assert cubin[:4] == b"\x7fELF" and session.handle
    session.close()
    session.close()
    with pytest.raises(ClosedError):
        session.add("ptx", a.code, "again")
    lonely = LinkSession([f"-arch={ARCH}"])
    lonely.add("ptx", a.code, "a")
    with pytest.raises(CompileError, match="step") as info:
        lonely.complete("cubin")
    assert info.value.op == "nvJitLinkComplete" and "step" in lonely.error_log
    lonely.close()
    assert "step" in lonely.error_log
    with pytest.raises(CompileError) as bad:
        LinkSession(["-arch=99"])
    assert bad.value.op == "nvJitLinkCreate" and bad.value.code == 1


def test_linker_options_are_written_as_nvjitlink_and_the_driver_take_them(cc):
    from cuda.bindings import driver

    o = cc.LinkerOptions(arch="sm_80", debug=True, ftz=True, max_register_count=32, kernels_used=["a", "b"],
                         ptxas_options="-v", split_compile=0)
    assert o.as_bytes("nvjitlink") == [b"-arch=sm_80", b"-maxrregcount=32", b"-g", b"-ftz=true",
                                       b"-kernels-used=a", b"-kernels-used=b", b"-Xptxas=-v", b"-split-compile=0"]
    assert o._prepare_nvjitlink_options(as_bytes=False)[0] == "-arch=sm_80"
    with pytest.raises(ValueError, match="only supports 'nvjitlink'"):
        o.as_bytes("driver")
    values, keys = cc.LinkerOptions(arch="sm_90", lineinfo=True, no_cache=True)._prepare_driver_options()
    assert dict(zip(keys[4:], values[4:])) == {
        driver.CUjit_option.CU_JIT_TARGET: driver.CUjit_target.CU_TARGET_COMPUTE_90,
        driver.CUjit_option.CU_JIT_GENERATE_LINE_INFO: 1,
        driver.CUjit_option.CU_JIT_CACHE_MODE: driver.CUjit_cacheMode.CU_JIT_CACHE_OPTION_NONE}
    with pytest.warns(DeprecationWarning, match="fma options is deprecated"):
        cc.LinkerOptions(fma=True)._prepare_driver_options()
    with pytest.raises(ValueError, match="split_compile option is not supported by the driver API"):
        cc.LinkerOptions(split_compile=1)._prepare_driver_options()
    assert cc.Linker.which_backend() == "nvJitLink"


def test_linker_links_programs_and_keeps_its_logs(cc):
    a, b = rdc_ptx(cc, KERNEL), rdc_ptx(cc, STEP)
    linker = cc.Linker(a, b, options=cc.LinkerOptions(name="both", arch=ARCH))
    assert linker.handle != 0
    code = linker.link("cubin")
    assert code.code_type == "cubin" and code.name == "both" and code.code[:4] == b"\x7fELF"
    assert linker.link("cubin") is code
    with pytest.raises(ValueError, match="Unsupported target type"):
        linker.link("fatbin")
    linker.close()
    with pytest.raises(ValueError, match="At least one ObjectCode"):
        cc.Linker()
    with pytest.raises(TypeError):
        cc.Linker(b"not an ObjectCode", options=cc.LinkerOptions(arch=ARCH))
    with pytest.raises(nvjitlink.nvJitLinkError):
        cc.Linker(a, options=cc.LinkerOptions(arch="99"))
    alone = cc.Linker(a, options=cc.LinkerOptions(arch=ARCH))
    with pytest.raises(nvjitlink.nvJitLinkError):
        alone.link("cubin")
    assert "step" in alone.get_error_log()
    alone.close()
    assert "step" in alone.get_error_log()


def test_ltoir_programs_link_with_lto(cc):
    lto = cc.ProgramOptions(arch=ARCH, link_time_optimization=True)
    pieces = [cc.Program(src, "c++", lto).compile("ltoir") for src in (KERNEL, STEP)]
    assert all(p.code_type == "ltoir" and p.code for p in pieces)
    linker = cc.Linker(*pieces, options=cc.LinkerOptions(arch=ARCH, link_time_optimization=True, ptx=True))
    ptx = linker.link("ptx")
    assert ptx.code_type == "ptx" and b".entry apply" in ptx.code
    with pytest.raises(RuntimeError, match='Unsupported code type "ltoir"'):
        pieces[0].get_kernel("apply")


def test_ptx_programs_are_linked_by_their_linker(cc):
    whole = KERNEL.replace("extern __device__ float step(float a, float x);", STEP)
    ptx = cc.Program(whole, "c++", cc.ProgramOptions(arch=ARCH)).compile("ptx")
    program = cc.Program(ptx.code.decode(), "ptx", cc.ProgramOptions(name="p", arch=ARCH, debug=True))
    assert program.backend == "nvJitLink" and int(program.handle) != 0
    cubin = program.compile("cubin")
    assert cubin.code_type == "cubin" and cubin.name == "p" and cubin.code[:4] == b"\x7fELF"
    program.close()
    program.close()


def test_nvvm_programs_compile_to_ptx_and_ltoir(cc):
    from ironaccel_cuda_compat.cuda_core._program import _get_nvvm_module

    try:
        nvvm = _get_nvvm_module()
    except RuntimeError:
        pytest.skip("libNVVM is not loadable here")
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
    program = cc.Program(ir, "nvvm", cc.ProgramOptions(name="ir", arch=ARCH))
    assert program.backend == "NVVM" and program.handle
    ptx = program.compile("ptx")
    assert ptx.name == "ir" and b".entry touch" in ptx.code and not ptx.code.endswith(b"\0")
    ltoir = cc.Program(bytearray(ir, "utf-8"), "nvvm", cc.ProgramOptions(arch=ARCH)).compile("ltoir")
    assert ltoir.code_type == "ltoir" and len(ltoir.code) > 0
    with pytest.raises(ValueError, match='Unsupported target_type="cubin" for NVVM'):
        program.compile("cubin")
    program.close()
    with pytest.raises(nvvm.nvvmError):
        cc.Program("not IR", "nvvm", cc.ProgramOptions(arch=ARCH)).compile("ptx")


def test_ptx_too_new_for_the_driver_is_compiled_by_nvjitlink(cc, monkeypatch):
    from ironaccel_cuda_compat.cuda_core import _ia, _module
    from ironaccel_cuda.errors import driver_error
    from ironaccel_cuda.program import ObjectCode as IaObjectCode

    whole = KERNEL.replace("extern __device__ float step(float a, float x);", STEP)
    ptx = cc.Program(whole, "c++", cc.ProgramOptions(arch=ARCH)).compile("ptx")
    loaded = []

    def library(code):  # cuLibraryLoadData of a driver older than the PTX
        if not isinstance(code, IaObjectCode):
            raise driver_error(222, "cuLibraryLoadData")  # CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        loaded.append(code)
        return "library"

    monkeypatch.setattr(_ia, "IaLibrary", library)
    monkeypatch.setattr(_module, "_current_arch", lambda: ARCH[3:])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ptx._load() == "library"
    assert loaded[0].kind == "cubin" and loaded[0].arch == ARCH
    cubin = cc.ObjectCode.from_cubin(loaded[0].code)
    with pytest.raises(Exception, match="CUDA_ERROR_UNSUPPORTED_PTX_VERSION"):
        cubin._load()


def test_pch_status_says_what_nvrtc_did_with_a_precompiled_header(cc, tmp_path):
    """cuda.core's Program.pch_status: None before a compile and for one that asks for no header, else NVRTC's
    outcome (cuda.core's test_cpp_program_pch_auto_creates failed on the H200 with None)."""
    code = 'extern "C" __global__ void my_kernel() {}'
    program = cc.Program(code, "c++", cc.ProgramOptions(arch=ARCH, create_pch=str(tmp_path / "test.pch")))
    assert program.pch_status is None
    program.compile("ptx")
    assert program.pch_status in ("created", "not_attempted", "failed")
    assert isinstance(program.pch_status, cc.typing.PCHStatusType)
    assert (tmp_path / "test.pch").is_file() == (program.pch_status == "created")
    program.close()
    plain = cc.Program(code, "c++", cc.ProgramOptions(arch=ARCH))
    plain.compile("ptx")
    assert plain.pch_status is None
