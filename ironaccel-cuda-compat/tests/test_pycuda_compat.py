"""The PyCUDA surface on the CPU: it installs and compiles with no CUDA toolkit; options, errors, packing, bins.

The device half is tests/gpu/test_pycuda_compat.py (also run against the fake
driver by test_fake_driver.py); PyCUDA's own tests run through
tools/run_pycuda_tests.py on a GPU.
"""

from __future__ import annotations

import os
import pickle
import shutil
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ironaccel
from ironaccel import InvalidArgument, InvalidState, OutOfMemory

SAXPY = """
__global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def _without_toolkit() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "LD_LIBRARY_PATH")}
    nvcc = shutil.which("nvcc")
    folders = [p for p in env.get("PATH", "").split(os.pathsep)
               if p and not os.path.isfile(os.path.join(p, "nvcc")) and "cuda" not in p.lower()]
    env["PATH"] = os.pathsep.join(folders)
    assert nvcc is None or shutil.which("nvcc", path=env["PATH"]) is None
    return env


def test_installs_and_compiles_without_a_toolkit(tmp_path):
    """No nvcc on PATH, no CUDA_HOME: import pycuda (installed), compile with NVRTC from its wheel."""
    code = textwrap.dedent(f"""
        import os, shutil
        from ironaccel_cuda_compat import pycuda as compat
        compat.install()
        import pycuda, pycuda.driver, pycuda.compiler, pycuda.tools, pycuda.gpuarray
        from pycuda.compiler import compile, DynamicModule, SourceModule
        assert shutil.which("nvcc") is None and "CUDA_HOME" not in os.environ
        cubin = compile({SAXPY!r}, arch="sm_90")
        assert cubin[:4] == b"\\x7fELF", cubin[:4]
        ptx = compile({SAXPY!r}, arch="compute_90", target="ptx")
        assert b".entry saxpy" in ptx
        with open("/proc/self/maps") as maps:
            nvrtc = sorted({{line.split()[-1] for line in maps if "libnvrtc.so" in line}})
        print("NVRTC", nvrtc)
    """)
    env = _without_toolkit()
    env["IRONACCEL_CUDA_CACHE_DIR"] = str(tmp_path / "cache")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("NVRTC")][0]
    assert "site-packages" in line and "/usr/local/cuda" not in line, line  # the wheel's NVRTC, no toolkit's


def test_compile_wraps_and_translates(cache_dir):
    from ironaccel_cuda_compat.pycuda import compiler

    ptx = compiler.compile(SAXPY, arch="compute_90", target="ptx").decode()
    assert ".entry saxpy(" in ptx  # extern "C": the plain name
    mangled = compiler.compile(SAXPY, arch="compute_90", target="ptx", no_extern_c=True).decode()
    assert ".entry _Z5saxpy" in mangled
    with_options = compiler.compile("__global__ void k(float* p) { p[0] = SCALE * p[0]; }", arch="compute_90",
                                    target="ptx", options=["-DSCALE=3.0f", "-O3", "--use_fast_math", "-m64",
                                                           "-Xcompiler", "-Wall", "--keep"]).decode()
    assert ".entry k(" in with_options
    code = compiler.compile("#include <stdio.h>\n#include <cassert>\n__global__ void k() { assert(1); printf(\"x\"); }",
                            code="sm_90")
    assert code[:4] == b"\x7fELF"
    with pytest.raises(compiler.CompileError) as info:
        compiler.compile("__global__ void k( {", arch="sm_90")
    exc = info.value
    assert isinstance(exc, ironaccel.CompileError) and "error" in exc.stderr and exc.command_line[0] == "nvrtc"
    assert "nvrtc compilation of kernel.cu failed" in str(exc)


def test_nvcc_options():
    from ironaccel_cuda_compat.pycuda.compiler import nvcc_to_nvrtc

    t = nvcc_to_nvrtc(["-arch", "sm_80", "-I", "/inc", "-I/inc2", "--include-path=/inc3", "-DA=1", "-D", "B",
                       "-std=c++17", "-O3", "-g", "-G", "-lineinfo", "-rdc=true", "-lcudadevrt", "-Xptxas", "-v",
                       "-maxrregcount=32", "--use_fast_math", "-Xcompiler", "-fPIC", "-m64", "--keep",
                       "--expt-relaxed-constexpr", "-ftz=true", "--weird-option"])
    assert t.arch == "sm_80" and t.include_dirs == ["/inc", "/inc2", "/inc3"] and t.libs == ["cudadevrt"]
    assert t.relocatable
    assert t.nvrtc == ["-DA=1", "-DB", "--std=c++17", "--device-debug", "--generate-line-info",
                       "--relocatable-device-code=true", "--ptxas-options=-v", "--maxrregcount=32", "--use_fast_math",
                       "--expt-relaxed-constexpr", "--ftz=true", "--weird-option"]
    g = nvcc_to_nvrtc(["-gencode", "arch=compute_90,code=sm_90"])
    assert (g.arch, g.code) == ("compute_90", "sm_90") and g.nvrtc == []


def test_error_classes():
    from ironaccel_cuda_compat.pycuda import _errors as e

    cases = {2: (e.MemoryError, OutOfMemory), 1: (e.LogicError, InvalidArgument), 201: (e.LogicError, InvalidState),
             719: (e.LaunchError, ironaccel.DriverError), 100: (e.RuntimeError, ironaccel.DriverError),
             600: (e.RuntimeError, InvalidState), 999: (e.Error, ironaccel.DriverError)}
    for code, (pycuda_cls, ia_cls) in cases.items():
        exc = e.from_code(code, "cuSomething", op="cuSomethingAsync")
        assert isinstance(exc, pycuda_cls) and isinstance(exc, ia_cls) and isinstance(exc, e.Error)
        assert exc.code == code and exc.op == "cuSomethingAsync" and str(exc).startswith("cuSomething failed: ")
        again = pickle.loads(pickle.dumps(exc))
        assert type(again) is type(exc) and again.code == code and str(again) == str(exc)
    assert isinstance(e.from_code(2, "x"), MemoryError)  # the built-in, through ironaccel's OutOfMemory
    bad = e.bad_type("prepared_call", "wrong")
    assert isinstance(bad, TypeError) and isinstance(bad, ValueError) and isinstance(bad, e.LogicError)
    plain = e.LogicError("order must be either F or C")  # PyCUDA code raises these with a message
    assert str(plain) == "order must be either F or C" and isinstance(plain, ironaccel.DriverError)
    compile_error = e.CompileError("failed", ["nvrtc", "-x"], stderr="log text")
    assert isinstance(compile_error, ironaccel.CompileError) and compile_error.log == "log text"
    assert "[command: nvrtc -x]" in str(compile_error) and "[stderr:\nlog text]" in str(compile_error)
    wrapped = e.translate(ironaccel.NotAvailable("cuda", "no driver here"), "cuInit")
    assert isinstance(wrapped, e.RuntimeError) and isinstance(wrapped, ironaccel.NotAvailable)


def test_argument_formats():
    from ironaccel_cuda_compat.pycuda._module import _offsets, _Prep, _tokens

    assert _offsets(_tokens("P12si")) == (0, 8, 20)
    assert _offsets(_tokens("bhiqP")) == (0, 2, 4, 8, 16)
    assert _offsets(_tokens("3f")) == (0, 4, 8)
    buf = bytearray(64)
    vec = np.array((1.0, 2.0, 3.0), dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4")])
    prep = _Prep("P12si", "test")
    prep.pack(buf, 0, 7, vec, 9)  # a 0-d structured array fills an 's' item with its bytes
    assert struct.unpack_from("P3fi", buf) == (7, 1.0, 2.0, 3.0, 9) and prep.size == 24
    complex_prep = _Prep("FD", "test")
    complex_prep.pack(buf, 0, np.complex64(1 + 2j), 3 - 4j)
    assert struct.unpack_from("ffdd", buf) == (1.0, 2.0, 3.0, -4.0)
    with pytest.raises(struct.error):
        complex_prep.pack(buf, 0, 1j)


def test_pool_bins_and_bitlog():
    from random import Random

    from ironaccel_cuda_compat.pycuda import _pools

    assert [_pools.bitlog2(v) for v in (0, 1, 17, 0xAFFE, 0x3AFFE, 0xCC3AFFE)] == [0, 0, 4, 15, 17, 27]
    rnd = Random(5)
    for _ in range(2000):
        s = rnd.randrange(1 << 31) >> rnd.randrange(32)
        b = _pools.bin_number(s)
        size = _pools.alloc_size(b)
        assert size >= s and _pools.bin_number(size) == b
        assert size <= max(s * (1 + 1 / 16) + 1, 16)  # 16 bins per power of two


def test_vector_types_and_dtype_names():
    from ironaccel_cuda_compat.pycuda import gpuarray, tools

    f3 = gpuarray.vec.float3
    assert f3.names == ("x", "y", "z") and f3.itemsize == 12
    v = gpuarray.vec.make_float3(1, 2, z=3)
    assert v.shape == () and v["z"] == 3 and v.dtype == f3
    with pytest.raises(TypeError):
        gpuarray.vec.make_int2(1, 2, 3)
    assert tools.dtype_to_ctype(f3) == "float3" and tools.dtype_to_ctype(np.uint32) == "unsigned"
    assert tools.dtype_to_ctype(np.int64) == "long" and tools.dtype_to_ctype(np.complex64) == "pycuda::complex<float>"
    assert tools.dtype_to_ctype(np.float64, with_fp_tex_hack=True) == "fp_tex_double"
    assert tools.parse_c_arg("const float *x").struct_char == "P" and tools.get_arg_type("unsigned int n") == "I"
    with pytest.raises(AttributeError, match="driver level"):
        gpuarray.to_gpu  # noqa: B018
    with pytest.raises(ValueError):
        tools.dtype_to_ctype(np.dtype([("a", "u1"), ("b", "f8")]))


def test_enums():
    from ironaccel_cuda_compat.pycuda import driver as drv

    assert int(drv.device_attribute.WARP_SIZE) == 10 and str(drv.device_attribute.WARP_SIZE) == "WARP_SIZE"
    assert drv.ctx_flags.BLOCKING_SYNC is drv.ctx_flags.SCHED_BLOCKING_SYNC
    assert drv.device_attribute.names["WARP_SIZE"] is drv.device_attribute.WARP_SIZE
    assert drv.jit_input_type.LIBRARY == 4 and drv.event_flags.DISABLE_TIMING == 2
    assert drv.host_alloc_flags.DEVICEMAP == 2 and getattr(drv.array3d_flags, "2DARRAY") == 1
    assert drv.compute_mode.EXCLUSIVE_PROCESS == 3 and drv.function_attribute.NUM_REGS == 4


def test_install_resolves_pycuda_to_the_compat():
    code = textwrap.dedent("""
        import sys
        from ironaccel_cuda_compat import pycuda as compat
        assert not compat.installed()
        compat.install(); compat.install()
        import pycuda, pycuda.driver, pycuda._driver, pycuda.tools, pycuda.compiler
        assert compat.installed() and pycuda is compat and pycuda.driver is compat.driver
        assert sys.modules["pycuda.tools"] is compat.tools and pycuda.VERSION_TEXT == "2026.1"
        # each keeps its own spec: a relative import inside a function must not warn __package__ != __spec__.parent
        aliased = [m for n, m in sys.modules.items() if n == "pycuda" or n.startswith("pycuda.")]
        assert all(m.__spec__.parent == m.__package__ for m in aliased), [m.__name__ for m in aliased]
        for name in ("pycuda.elementwise", "pycuda.gl", "pycuda.driver.nothing"):
            try:
                __import__(name)
            except ModuleNotFoundError as exc:
                assert exc.name == name, exc.name
            else:
                raise AssertionError(name)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_install_refuses_when_the_real_pycuda_is_imported(tmp_path):
    (tmp_path / "pycuda").mkdir()
    (tmp_path / "pycuda" / "__init__.py").write_text("REAL = True\n")
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import pycuda
        from ironaccel_cuda_compat import pycuda as compat
        try:
            compat.install()
        except Exception as exc:
            print(type(exc).__name__, "already imported" in str(exc))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "InvalidState True", out.stderr


def test_ipc_handles_carry_their_bytes():
    from cuda.bindings import driver

    from ironaccel_cuda_compat.pycuda import _errors, _memory

    from ironaccel_cuda import ipc

    data = bytearray(range(64))
    assert _memory.handle_data(data, "cuIpcOpenMemHandle") == bytes(data)  # what ironaccel_cuda.ipc's opens take
    for kind in (driver.CUipcMemHandle, driver.CUipcEventHandle):
        assert ipc.handle_bytes(ipc.handle_from_bytes(kind, bytes(data))) == bytes(data)
    for bad in (bytearray(10), "not bytes"):
        with pytest.raises(_errors.LogicError) as info:
            _memory.handle_data(bad, "cuIpcOpenMemHandle")
        assert isinstance(info.value, InvalidArgument)


# -- records with a custom itemsize: nvcc's placement of a trailing alignment attribute -----------------------

def _records():
    """RECORDS and record_dtypes() of tests/gpu/records.py (shared with the device test)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("records", Path(__file__).parent / "gpu" / "records.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RECORDS, module.record_dtypes()


def _stored_constants(ptx: str) -> list[int]:
    """The values a kernel of constant stores writes to d[0], d[1], ... (from its PTX)."""
    import re

    regs = dict(re.findall(r"mov\.[ub]32\s+(%r\d+),\s*(-?\d+);", ptx))
    out = {int(at or 0) // 4: int(regs[reg])
           for at, reg in re.findall(r"st\.global\.[ub]32\s+\[%rd\d+(?:\+(\d+))?\],\s*(%r\d+);", ptx)}
    return [out[i] for i in sorted(out)]


def test_trailing_alignment_attributes_move_before_the_braces():
    from ironaccel_cuda_compat.pycuda.compiler import gnu_struct_alignment

    RECORDS, _ = _records()
    out = gnu_struct_alignment(RECORDS)
    assert "typedef struct ALIGN(32) { int val1; char pad; }  inner_t;" in out
    assert "typedef struct __attribute__((aligned(32))) _o32 {" in out
    assert "}  out32_t;" in out and out.count("ALIGN(") == RECORDS.count("ALIGN(")
    nested = "struct A { struct B { int x; } __align__(16) b; } __align__(32);"
    assert gnu_struct_alignment(nested) == "struct __align__(32) A { struct __align__(16) B { int x; }  b; } ;"
    untouched = ("void f() { if (x) { y(); } }", "class C : public D { int a; } __align__(8);",
                 "#define ALIGNED(n) n\nstruct S { int a; } ALIGNED(4);", "int a[] = {1, 2};")
    for text in untouched:
        assert gnu_struct_alignment(text) == text


def test_record_layouts_match_numpy_itemsize_as_under_nvcc():
    # NVRTC ignores an alignment attribute after a typedef'd struct's closing brace (sizeof 16 where nvcc, and so
    # PyCUDA, gives 32); the surface moves it where NVRTC applies it.  PTX needs no device.
    from ironaccel_cuda_compat.pycuda import compiler

    RECORDS, (inner, outer, in8, out32) = _records()
    want = [inner.itemsize, outer.itemsize, outer.fields["nested"][1], in8.itemsize, out32.itemsize,
            out32.fields["nested"][1]]
    assert want == [32, 64, 32, 8, 32, 8]
    ptx = compiler.compile(RECORDS, arch="compute_90", target="ptx").decode()
    assert _stored_constants(ptx) == want
    raw = compiler.compile_plain('extern "C" {' + RECORDS + "}", [], False, "nvcc", None, "ptx", arch="compute_90")
    assert _stored_constants(raw.decode()) != want  # NVRTC as given: the defect this works around
