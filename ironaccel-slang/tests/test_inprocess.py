"""The in-process compiler (Slang's library through its COM API: a session per target and options, a module per
source) gives what slangc gives, refuses what slangc refuses, or lets slangc run.

Compiler-only tests: they need slangc and the library beside it (slangtorch's wheel), nothing else.  What "the
same" means: the code byte for byte; the reflection JSON equal but for two keys reflect.py never reads --
slangc's ``entryPoints[i].bindings`` (its usage of the program's global parameters, which Slang's emitter writes
only for a compile request that generated code: an empty list here, global parameters being refused) and the
library's ``hashedStrings`` (the program's string literals, which a linked program from a session also lists for
the core module's code a generic pulls in) -- and the kernel reflect.py reads from it identical.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

import pytest

from ironaccel.errors import CompileError, InvalidArgument, Unsupported
from ironaccel_slang import TARGETS, Slang, compiler, inprocess

SAXPY = Slang("""
struct Params { float a; uint n; };
[shader("compute")]
[numthreads(64, 1, 1)]
void saxpy(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform StructuredBuffer<float> x,
           uniform Params p)
{
    if (tid.x < p.n)
        y[tid.x] = p.a * x[tid.x] + y[tid.x];
}
""")
SCALE = Slang("""
extern static const uint FACTOR = 3;
extern static const float OFFSET = 0.5;
[shader("compute")]
[numthreads(32, 1, 1)]
void scale(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform uint n)
{
    if (tid.x < n)
        y[tid.x] = y[tid.x] * FACTOR + OFFSET;
}
""")
RICH = Slang("""
struct Inner { float2 v; int k; };
struct Params { float a; uint n; float3 c; Inner inner; uint arr[3]; };
[shader("compute")]
[numthreads(1, 1, 1)]
void rich(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> out, uniform Params p, uniform float s)
{
    out[0] = p.a; out[1] = float(p.n); out[2] = p.c.x; out[3] = p.inner.v.y; out[4] = float(p.arr[2]); out[5] = s;
}
""")
FILL = Slang("""
[shader("compute")]
[numthreads(64, 1, 1)]
void fill<T : __BuiltinArithmeticType>(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<T> y,
                                       uniform T value, uniform uint n)
{
    if (tid.x < n)
        y[tid.x] = value;
}
""")
MATRIX = Slang("""
struct Params { float a; float2x3 m; float4x4 t; };
[shader("compute")]
[numthreads(1, 1, 1)]
void mat(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> out, uniform Params p)
{
    out[0] = p.m[1][2] + p.t[3][0] * p.a;
}
""")
ONE = '[shader("compute")] [numthreads(1,1,1)] void k(uniform RWStructuredBuffer<float> y) {{ y[0] = {}; }}'


def _kernels_module():
    """tests/test_kernels.py, whose ten kernels are compared too (the suite imports test files by path)."""
    spec = importlib.util.spec_from_file_location("ironaccel_slang_test_kernels",
                                                  Path(__file__).with_name("test_kernels.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


KERNELS = [(SAXPY, "saxpy", None), (SCALE, "scale", {"FACTOR": 5}), (SCALE, "scale", None), (RICH, "rich", None),
           (FILL.specialized("float"), "fill", None), (FILL.specialized("int"), "fill", None),
           *((kernel, entry, None) for kernel, entry in _kernels_module().KERNELS)]


@pytest.fixture
def library(slangc):
    """The compiler library beside slangc; a skip where there is none (slangc then runs, as the other tests show)."""
    path = inprocess.find_library(slangc)
    if path is None:
        pytest.skip("no Slang compiler library beside slangc")
    return path


@pytest.fixture
def runs(monkeypatch):
    """Per compile: True where it ran in process, False where slangc ran (the disk cache off)."""
    seen: list[bool] = []
    real = inprocess.compile

    def counted(*args):
        try:
            done = real(*args)
        except inprocess.Refused:
            seen.append(True)
            raise
        seen.append(done is not None)
        return done

    monkeypatch.setattr(inprocess, "compile", counted)
    monkeypatch.setenv("IRONACCEL_SLANG_CACHE", "0")
    return seen


def compiler_options(target: str, options: tuple[str, ...]) -> tuple[str, ...]:
    from ironaccel_slang import _OPTIONS

    return _OPTIONS[TARGETS[target]] + options


def _text(code: bytes | str) -> str:
    return code if isinstance(code, str) else code.decode()


def _fresh(monkeypatch, inprocess_on: bool) -> None:
    monkeypatch.setenv(inprocess.ENV_INPROCESS, "1" if inprocess_on else "0")
    compiler.clear_memory()


def _comparable(reflection: dict, own: bool) -> dict:
    """The reflection without the keys only one side writes (the module docstring says why)."""
    kept = {k: v for k, v in reflection.items() if k != "hashedStrings" or not own}
    kept["entryPoints"] = [{k: v for k, v in p.items() if k != "bindings" or own or v != []}
                           for p in reflection.get("entryPoints", ())]
    return kept


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("kernel,entry,constants", KERNELS, ids=[f"{k[1]}{i}" for i, k in enumerate(KERNELS)])
def test_code_and_reflection_are_slangc_s(library, runs, monkeypatch, target, kernel, entry, constants):
    _fresh(monkeypatch, True)
    mine = kernel.compile(target, entry, constants)
    assert runs == [True], "not compiled in process"
    _fresh(monkeypatch, False)
    theirs = kernel.compile(target, entry, constants)
    assert runs == [True, False]
    assert mine.code == theirs.code
    assert _comparable(mine.reflection, True) == _comparable(theirs.reflection, False)
    assert mine.kernel == theirs.kernel and mine.needs == theirs.needs


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("options", [(), ("-matrix-layout-row-major",)], ids=["default", "row-major"])
def test_a_matrix_lays_out_as_slangc_lays_it_out(library, runs, monkeypatch, target, options):
    """Matrices are not params ironaccel binds (reflect.py refuses them), but their layout is the session's
    default matrix layout, which must be slangc's (column-major; a SessionDesc's default is row-major)."""
    source = Slang(MATRIX.source, options=options)
    got = []
    for on in (True, False):
        _fresh(monkeypatch, on)
        with pytest.raises(Unsupported, match="matrix"):
            source.compile(target, "mat")
        got.append(compiler.run_slangc("x", source.source, "mat", TARGETS[target], compiler_options(target, options),
                                       None))
    assert runs == [True, False]  # the second call of each is the memory cache's
    assert got[0].code == got[1].code
    assert _comparable(got[0].reflection, True) == _comparable(got[1].reflection, False)


def test_a_module_is_loaded_once_per_session_and_constants_are_per_compile(library, runs, monkeypatch):
    """One source compiled with three sets of constants: one module of the source, one per constants module, and
    each compile's code is slangc's for its constants (a module reused never keeps another compile's values)."""
    source = Slang(SCALE.source + "// a source of this test's own\n")
    sets = ({"FACTOR": 5, "OFFSET": 0.25}, {"FACTOR": 7, "OFFSET": 0.25}, None, {"FACTOR": 5, "OFFSET": 0.25})
    _fresh(monkeypatch, False)
    want = [source.compile("webgpu", "scale", c).code for c in sets]
    _fresh(monkeypatch, True)
    source.compile("cuda", "scale")  # the global session, made now where it was not
    state = inprocess._global
    assert state is not None
    session = state.sessions.get(("wgsl", ("-g0", "-line-directive-mode", "none")))
    before = session.loads if session is not None else 0
    got = []
    for constants in sets:
        compiler.clear_memory()
        got.append(source.compile("webgpu", "scale", constants).code)
    assert got == want and len(set(got)) == 3
    session = state.sessions[("wgsl", ("-g0", "-line-directive-mode", "none"))]
    assert session.loads - before == 3  # the kernel, FACTOR = 5, FACTOR = 7


def test_sessions_are_replaced_after_their_share_of_modules_and_their_number_is_bounded(library, runs, monkeypatch):
    monkeypatch.setattr(inprocess, "MODULES_PER_SESSION", 3)
    monkeypatch.setattr(inprocess, "SESSIONS", 2)
    _fresh(monkeypatch, True)
    handles = []
    for i in range(7):
        assert f"{i}.0" in _text(Slang(ONE.format(f"{i}.0")).compile("webgpu", "k").code)
        state = inprocess._global
        assert state is not None
        handles.append(state.sessions[("wgsl", ("-g0", "-line-directive-mode", "none"))])
    assert len({id(h) for h in handles}) == 3  # modules 1-3, 4-6, 7 (the objects kept: their ids stay theirs)
    for target in ("vulkan", "opengl", "cuda"):
        Slang(ONE.format("1.5")).compile(target, "k")
    assert len(inprocess._global.sessions) == 2 and all(runs)


def test_a_compile_error_is_a_compile_error_with_slang_s_diagnostics(library, runs, monkeypatch):
    bad = Slang(ONE.format("undefined_name"))
    logs = []
    for on in (True, False):
        _fresh(monkeypatch, on)
        with pytest.raises(CompileError) as info:
            bad.compile("vulkan", "k")
        assert "undefined_name" in info.value.log and "error" in info.value.log
        logs.append(info.value.log)
    assert runs == [True, False]
    # slangc's diagnostics, file name and all; loading a module, Slang adds that the load failed
    assert logs[1].strip() in logs[0] and "kernel.slang:1:" in logs[0]
    _fresh(monkeypatch, True)
    with pytest.raises(CompileError):  # the same source again: Slang forgot the failed module, it fails again
        bad.compile("vulkan", "k")


@pytest.mark.parametrize("source", ["", ONE.format("1.0"), "// nothing but a comment\n"], ids=["empty", "other",
                                                                                                  "comment"])
def test_a_missing_entry_point_is_invalid_argument_naming_it(library, runs, monkeypatch, source):
    _fresh(monkeypatch, True)
    with pytest.raises(InvalidArgument, match="no entry point 'absent'"):
        Slang(source).compile("vulkan", "absent")
    assert runs == [True]


def test_a_generic_entry_point_left_unspecialized_is_a_compile_error(library, runs, monkeypatch):
    for on in (True, False):
        _fresh(monkeypatch, on)
        with pytest.raises(CompileError, match="speciali"):
            FILL.compile("webgpu", "fill")
    with pytest.raises(CompileError, match="speciali"):
        FILL.specialized("float", "int").compile("webgpu", "fill")  # one too many
    assert runs == [True, False, False]


def test_nul_in_an_entry_point_or_option_is_invalid_argument_before_any_compile(library, runs, monkeypatch):
    _fresh(monkeypatch, True)
    with pytest.raises(InvalidArgument, match="NUL"):
        SAXPY.compile("vulkan", "sax\0py")
    with pytest.raises(InvalidArgument, match="NUL"):
        Slang(SAXPY.source, options=("-DX=\0",)).compile("vulkan", "saxpy")
    assert runs == []


def test_a_huge_source_compiles(library, runs, monkeypatch):
    _fresh(monkeypatch, True)
    helpers = "".join(f"float f{i}(float x) {{ return x * {i}.0 + 1.0; }}\n" for i in range(3000))
    source = helpers + "// " + "x" * 2_000_000 + "\n" + ONE.format("f2999(2.0)")
    assert "k" in _text(Slang(source).compile("webgpu", "k").code)
    assert runs == [True]


def test_options_slangc_s_parser_refuses_are_slangc_s_errors(library, runs, monkeypatch):
    source = ONE.format("1.0")
    for options, says in ((("-no-such-option",), "no-such-option"), (("-profile", "no_such_profile"), "profile"),
                          (("-D",), "error")):
        _fresh(monkeypatch, True)
        with pytest.raises(CompileError, match=says):
            Slang(source, options=options).compile("webgpu", "k")
    assert runs == [False, False, False]  # slangc ran, and said why


def test_defines_include_folders_and_other_options_run_in_process(library, runs, monkeypatch, tmp_path):
    (tmp_path / "value.h").write_text("#define VALUE 4.25\n")
    source = '#include "value.h"\n' + ONE.format("VALUE + EXTRA")
    _fresh(monkeypatch, True)
    for options in (("-I", str(tmp_path), "-DEXTRA=1.0"), (f"-I{tmp_path}", "-D", "EXTRA=1.0", "-O1"),
                    ("-I", str(tmp_path), "-D", "EXTRA=1.0", "-warnings-disable", "30081")):
        compiler.clear_memory()
        text = _text(Slang(source, options=options).compile("webgpu", "k").code)
        assert "5.25" in text or "4.25" in text
    assert runs == [True, True, True]


def test_options_naming_inputs_or_outputs_run_slangc(library, runs, monkeypatch, tmp_path):
    extra = tmp_path / "extra.slang"
    extra.write_text("float helper() { return 1.0; }\n")
    _fresh(monkeypatch, True)
    for options in ((str(extra),), ("-o", str(tmp_path / "x")), ("-stage", "compute")):
        compiler.clear_memory()
        try:
            Slang(ONE.format("2.0"), options=options).compile("webgpu", "k")
        except CompileError:
            pass  # whatever slangc makes of it: its to say
    assert runs == [False, False, False]


def test_reflection_json_with_slang_s_escaped_quote_reads(library):
    text = '{"hashedStrings": {"it\\\'s": 1, "back\\\\": 2, "both\\\\\\\'": 3}, "entryPoints": []}'
    assert compiler._reflection("x", text)["hashedStrings"] == {"it's": 1, "back\\": 2, "both\\'": 3}


def test_a_missing_library_means_slangc_runs(library, runs, monkeypatch, tmp_path):
    monkeypatch.setenv(inprocess.ENV_LIBRARY, str(tmp_path / "no-such-libslang.so"))
    _fresh(monkeypatch, True)
    out = SAXPY.compile("webgpu", "saxpy")
    assert runs == [False] and "saxpy" in _text(out.code)


def test_a_library_of_another_build_means_slangc_runs(library, slangc):
    assert inprocess.compile(slangc, "0.0.0-not-this-build", ONE.format("1.0"), "k", "wgsl", (), None) is None


def test_threads_compile_one_at_a_time_and_each_gets_its_own_output(library, runs, monkeypatch):
    _fresh(monkeypatch, True)
    results: dict[int, bytes | str] = {}

    def one(i: int) -> None:
        target = ("webgpu", "vulkan", "cuda")[i % 3]  # the entry point keeps its name in the code (GLSL's: main)
        results[i] = Slang(f"[shader(\"compute\")] [numthreads(1,1,1)] void k{i}(uniform RWStructuredBuffer<float> y)"
                           f" {{ y[0] = {i}.0; }}").compile(target, f"k{i}").code

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(runs) and len(runs) == 12
    assert all(f"k{i}".encode() in (results[i] if isinstance(results[i], bytes) else results[i].encode())
               for i in range(12))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_makes_its_own_global_session(library, monkeypatch):
    monkeypatch.setenv("IRONACCEL_SLANG_CACHE", "0")
    _fresh(monkeypatch, True)
    SAXPY.compile("webgpu", "saxpy")
    parent = inprocess._global
    assert parent is not None and parent.pid == os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if it compiled in a global session of its own
        status = 1
        try:
            compiler.clear_memory()
            code = SCALE.compile("webgpu", "scale").code
            state = inprocess._global
            status = 0 if state is not None and state.pid == os.getpid() and "scale" in _text(code) else 2
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert inprocess._global is parent


def test_cuda_s_prelude_is_one_disk_cache_entry_not_a_part_of_every_kernel_s(library, slang_cache, monkeypatch):
    """Slang's CUDA prelude (hundreds of KB where its own is used) heads every kernel's code: the disk cache keeps
    it once, by its digest, so a hit checks and reads the kernel's bytes only; without its entry a hit is a miss."""
    monkeypatch.setenv(inprocess.ENV_INPROCESS, "1")
    calls: list[int] = []
    real = compiler._compile

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(compiler, "_compile", counted)
    compiler.clear_memory()
    compiler._preludes.clear()
    first = SAXPY.compile("cuda", "saxpy")
    out = compiler.run_slangc("x", SAXPY.source, "saxpy", "cuda", compiler_options("cuda", ()), None)
    assert out.head > 4096 and b'extern "C" __global__' in out.code[out.head:]
    assert b'extern "C" __global__' not in out.code[:out.head]
    entries = sorted(slang_cache.iterdir(), key=lambda p: p.stat().st_size)
    assert len(entries) == 2 and entries[0].stat().st_size < out.head < entries[1].stat().st_size
    compiler.clear_memory()
    compiler._preludes.clear()  # a new process: the prelude is read from its entry
    again = SAXPY.compile("cuda", "saxpy")
    assert again == first and len(calls) == 1
    entries[1].unlink()  # the prelude's entry gone: the kernel's entry alone is a miss, compiled again
    compiler.clear_memory()
    compiler._preludes.clear()
    assert SAXPY.compile("cuda", "saxpy") == first and len(calls) == 2
    assert len(list(slang_cache.iterdir())) == 2
