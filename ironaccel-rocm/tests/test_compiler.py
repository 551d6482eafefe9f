"""hipRTC compiles HIP C++ to AMDGPU code objects on this CPU-only machine, for real."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from ironaccel.errors import CompileError, InvalidArgument, NotAvailable
from ironaccel_rocm import hiprtc
from ironaccel_rocm.compiler import EM_AMDGPU, CodeObject, Program, amdgpu_mach

try:
    RTC = hiprtc.load()
except NotAvailable as exc:  # pragma: no cover - depends on the machine
    RTC = None
    WHY = exc.reason
else:
    WHY = ""

needs_hiprtc = pytest.mark.skipif(RTC is None, reason=f"hipRTC unavailable: {WHY}")

SCALE = r"""
extern "C" __global__ void scale_offset(const float* x, float* y, float a, float b, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""

# EF_AMDGPU_MACH values from LLVM's AMDGPU ELF documentation.
MACH = {"gfx908": 0x030, "gfx90a": 0x03F, "gfx1030": 0x036}


@needs_hiprtc
@pytest.mark.parametrize("arch", sorted(MACH))
def test_compiles_code_object_for_the_requested_gpu(arch: str) -> None:
    code = Program(SCALE, ["-O3"]).compile(arch=arch)
    assert isinstance(code, CodeObject) and isinstance(code, bytes)
    assert code.format == "elf"
    assert int.from_bytes(code[18:20], "little") == EM_AMDGPU
    assert amdgpu_mach(code) == MACH[arch]
    assert b"scale_offset" in code and b"scale_offset.kd" in code  # the kernel and its descriptor
    assert code.arch == arch and code.options == (f"--offload-arch={arch}", "-O3")


@needs_hiprtc
def test_target_features_are_accepted() -> None:
    code = Program(SCALE).compile(arch="gfx90a:xnack+")
    assert amdgpu_mach(code) == MACH["gfx90a"]


@needs_hiprtc
def test_compile_error_carries_the_log() -> None:
    with pytest.raises(CompileError) as info:
        Program('extern "C" __global__ void broken(float* y) { y[0] = undeclared_name; }').compile("gfx90a")
    err = info.value
    assert err.op == "hiprtcCompileProgram"
    assert (err.code, err.code_name) == (6, "HIPRTC_ERROR_COMPILATION")
    assert "undeclared_name" in err.log and "error" in err.log


@needs_hiprtc
def test_options_reach_the_compiler() -> None:
    source = (
        '#if SCALE_BY != 3\n#error "SCALE_BY must be 3"\n#endif\n'
        'extern "C" __global__ void k(int* y) { y[0] = SCALE_BY; }'
    )
    with pytest.raises(CompileError) as info:
        Program(source).compile("gfx90a")
    assert "SCALE_BY must be 3" in info.value.log
    assert Program(source, ["-DSCALE_BY=3"]).compile("gfx90a").format == "elf"
    assert Program(source).compile("gfx90a", options=["-DSCALE_BY=3"]).format == "elf"


@needs_hiprtc
def test_in_memory_headers() -> None:
    source = '#include "twice.h"\nextern "C" __global__ void k(int* y) { y[0] = twice(21); }'
    with pytest.raises(CompileError):
        Program(source).compile("gfx90a")
    code = Program(source, headers={"twice.h": "__device__ inline int twice(int v) { return 2 * v; }"}).compile(
        "gfx90a")
    assert code.format == "elf"


@needs_hiprtc
def test_unknown_gpu_is_rejected_before_hiprtc() -> None:
    """hipRTC 5.2 aborts the process on an ISA its compiler does not know; we refuse it first."""
    if RTC is None or RTC.supported_isas is None:
        pytest.skip("libamd_comgr could not be asked for its ISA list")
    unknown = next(a for a in ("gfx942", "gfx950", "gfx1200", "gfx1100") if a not in RTC.supported_isas)
    with pytest.raises(InvalidArgument) as info:
        Program(SCALE).compile(unknown)
    assert unknown in str(info.value) and "gfx90a" in str(info.value)


@pytest.mark.parametrize("arch", ["sm_90", "", "gfx90a gfx908", ["gfx90a"], "gfx90a;rm -rf"])
def test_bad_arch_strings(arch) -> None:
    with pytest.raises(InvalidArgument) as info:
        Program(SCALE).compile(arch)
    assert info.value.op == "hiprtcCompileProgram"


@pytest.mark.parametrize("source", ["", "   ", b"", None, 42, "a\0b"])
def test_bad_source(source) -> None:
    with pytest.raises(InvalidArgument) as info:
        Program(source)  # type: ignore[arg-type]
    assert info.value.op == "hiprtcCreateProgram"


@pytest.mark.parametrize("options", ["-O3", ["--offload-arch=gfx908"], ["-o", "x"], [3]])
def test_bad_options(options) -> None:
    with pytest.raises(InvalidArgument):
        Program(SCALE, options)


def test_amdgpu_mach_rejects_other_files() -> None:
    assert amdgpu_mach(b"") is None
    assert amdgpu_mach(b"\x7fELF" + bytes(60)) is None  # ELFCLASSNONE
    x86 = bytearray(64)
    x86[:5] = b"\x7fELF\x02"
    x86[18:20] = (62).to_bytes(2, "little")  # EM_X86_64
    assert amdgpu_mach(bytes(x86)) is None


def test_missing_library_lists_where_it_looked(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    missing = tmp_path / "no-rocm-here"
    monkeypatch.setenv(hiprtc.ENV_LIBRARY, str(missing))
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    monkeypatch.setattr(hiprtc, "HIPRTC_NAMES", ("libhiprtc-missing.so",))
    monkeypatch.setattr(hiprtc, "AMDHIP_NAMES", ("libamdhip64-missing.so",))
    hiprtc.reset()
    try:
        with pytest.raises(NotAvailable) as info:
            Program(SCALE).compile("gfx90a")
    finally:
        hiprtc.reset()
    reason = info.value.reason
    assert reason.startswith("hipRTC not found")
    assert str(missing / "libhiprtc-missing.so") in reason
    assert str(tmp_path / "rocm" / "lib" / "libamdhip64-missing.so") in reason
    assert hiprtc.ENV_LIBRARY in (info.value.fix or "")


def test_result_names() -> None:
    assert hiprtc.result_name(0) == "HIPRTC_SUCCESS"
    assert hiprtc.result_name(6) == "HIPRTC_ERROR_COMPILATION"
    assert hiprtc.result_name(100) == "HIPRTC_ERROR_LINKING"
    assert hiprtc.result_name(77) == "HIPRTC_ERROR_77"
    assert len(set(hiprtc.RESULT_NAMES.values())) == len(hiprtc.RESULT_NAMES)


def _in_child(code: str) -> str:
    """Run `code` in a fresh process (hipRTC aborts or segfaults the process on the inputs tested here)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"the child died ({proc.returncode}): {proc.stderr[-2000:]}"
    return proc.stdout.strip()


@needs_hiprtc
@pytest.mark.parametrize("arch", ["gfx90a:bogus+", "gfx1030:sramecc+", "gfx1030:xnack-", "gfx900:sramecc+",
                                  "gfx90a:xnack+:xnack-"])
def test_target_features_hiprtc_would_abort_on_are_refused(arch: str) -> None:
    out = _in_child(f"""
        from ironaccel_rocm.compiler import Program
        try:
            Program({SCALE!r}).compile({arch!r})
        except Exception as exc:
            print(type(exc).__name__, "|", exc.op, "|", exc)
        else:
            print("compiled")
    """)
    assert out.startswith("InvalidArgument | hiprtcCompileProgram |"), out
    assert arch in out


@needs_hiprtc
def test_feature_messages_say_what_the_gpu_offers() -> None:
    if RTC is None or RTC.valid_target("gfx90a") is None:
        pytest.skip("libamd_comgr cannot check target IDs here")
    with pytest.raises(InvalidArgument, match="gfx1030 has no target features"):
        Program(SCALE).compile("gfx1030:sramecc+")
    with pytest.raises(InvalidArgument, match="gfx900 offers only xnack"):
        Program(SCALE).compile("gfx900:sramecc+")
    with pytest.raises(InvalidArgument, match="unknown target feature 'bogus'"):
        Program(SCALE).compile("gfx90a:bogus+")


@needs_hiprtc
@pytest.mark.parametrize("arch, mach", [("gfx90a:sramecc+:xnack-", MACH["gfx90a"]),
                                        ("gfx90a:xnack-:sramecc+", MACH["gfx90a"]),
                                        ("gfx908:sramecc-", MACH["gfx908"])])
def test_valid_target_ids_compile(arch: str, mach: int) -> None:
    code = Program(SCALE).compile(arch)
    assert amdgpu_mach(code) == mach and code.arch == arch


@needs_hiprtc
def test_threads_compiling_at_once_get_their_own_code() -> None:
    out = _in_child(f"""
        import threading
        from ironaccel_rocm.compiler import Program
        sources = [{SCALE!r}.replace("a * x[i] + b", f"a * x[i] + b + {{k}}.0f") for k in range(8)]
        alone = [bytes(Program(s).compile("gfx90a")) for s in sources]
        for _ in range(3):
            got = [b""] * len(sources)
            def work(k):
                got[k] = bytes(Program(sources[k]).compile("gfx90a"))
            threads = [threading.Thread(target=work, args=(k,)) for k in range(len(sources))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert got == alone, [len(g) for g in got]
        print("same", len(set(alone)))
    """)
    assert out == "same 8"


@pytest.mark.skipif(os.path.exists("/dev/kfd"), reason="this machine has an AMD GPU (/dev/kfd)")
def test_compile_without_arch_refuses_when_there_is_no_gpu_to_ask() -> None:
    with pytest.raises(InvalidArgument) as info:
        Program(SCALE).compile()
    assert "compile() needs arch=" in info.value.detail and "no AMD GPU" in info.value.detail
