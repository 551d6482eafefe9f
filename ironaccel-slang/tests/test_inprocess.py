"""The in-process compiler (Slang's library, one global session) gives exactly what slangc gives, or slangc runs.

Compiler-only tests: they need slangc and the library beside it (slangtorch's wheel), nothing else.
"""

from __future__ import annotations

import os
import threading

import pytest

from ironaccel.errors import CompileError
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
KERNELS = [(SAXPY, "saxpy", None), (SCALE, "scale", {"FACTOR": 5}), (RICH, "rich", None),
           (FILL.specialized("float"), "fill", None)]


@pytest.fixture
def library(slangc):
    """The compiler library beside slangc; a skip where there is none (slangc then runs, as the other tests show)."""
    path = inprocess.find_library(slangc)
    if path is None:
        pytest.skip("no Slang compiler library beside slangc")
    return path


@pytest.fixture
def runs(monkeypatch):
    """Per compile (slangc's arguments): True where it ran in process, False where slangc ran; and the files."""
    seen: list[bool] = []
    files: list[tuple[bytes, bytes]] = []
    real_run, real_inprocess = compiler._run, inprocess.run

    def counted(slangc, version, args):
        ran = real_inprocess(slangc, version, args)
        seen.append(ran is not None)
        return ran

    def kept(backend, argv, folder, entry=None):
        real_run(backend, argv, folder, entry)
        if "-reflection-json" in argv:
            out, refl = argv[argv.index("-o") + 1], argv[argv.index("-reflection-json") + 1]
            with open(out, "rb") as f, open(refl, "rb") as g:
                files.append((f.read(), g.read()))

    monkeypatch.setattr(inprocess, "run", counted)
    monkeypatch.setattr(compiler, "_run", kept)
    monkeypatch.setenv("IRONACCEL_SLANG_CACHE", "0")
    return seen, files


def _text(code: bytes | str) -> str:
    return code if isinstance(code, str) else code.decode()


def _fresh(monkeypatch, inprocess_on: bool) -> None:
    monkeypatch.setenv(inprocess.ENV_INPROCESS, "1" if inprocess_on else "0")
    compiler.clear_memory()


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("kernel,entry,constants", KERNELS, ids=[k[1] for k in KERNELS])
def test_code_and_reflection_json_are_byte_identical_to_slangc(library, runs, monkeypatch, target, kernel, entry,
                                                               constants):
    seen, files = runs
    _fresh(monkeypatch, True)
    mine = kernel.compile(target, entry, constants)
    assert seen and all(seen), "not compiled in process"
    seen.clear()
    _fresh(monkeypatch, False)
    theirs = kernel.compile(target, entry, constants)
    assert seen and not any(seen)
    assert len(files) == 2 and files[0] == files[1]  # the code and the reflection JSON, byte for byte
    assert mine.code == theirs.code and mine.reflection == theirs.reflection


def test_a_compile_error_is_a_compile_error_with_slangc_s_diagnostics(library, runs, monkeypatch):
    seen, _ = runs
    bad = Slang("[shader(\"compute\")] [numthreads(1,1,1)] void k(uniform RWStructuredBuffer<float> y) "
                "{ y[0] = undefined_name; }")
    logs = []
    for on in (True, False):
        _fresh(monkeypatch, on)
        with pytest.raises(CompileError) as info:
            bad.compile("vulkan", "k")
        assert "undefined_name" in info.value.log and "error" in info.value.log
        logs.append(info.value.log)
    assert seen == [True, False]
    assert logs[0].strip() == logs[1].strip()


def test_a_missing_library_means_slangc_runs(library, runs, monkeypatch, tmp_path):
    seen, _ = runs
    monkeypatch.setenv(inprocess.ENV_LIBRARY, str(tmp_path / "no-such-libslang.so"))
    _fresh(monkeypatch, True)
    out = SAXPY.compile("webgpu", "saxpy")
    assert seen == [False] and "saxpy" in _text(out.code)


def test_a_library_of_another_build_means_slangc_runs(library, slangc):
    assert inprocess.run(slangc, "0.0.0-not-this-build", ["-v"]) is None


def test_threads_compile_one_at_a_time_and_each_gets_its_own_output(library, runs, monkeypatch):
    seen, _ = runs
    _fresh(monkeypatch, True)
    results: dict[int, bytes | str] = {}

    def one(i: int) -> None:
        results[i] = Slang(f"[shader(\"compute\")] [numthreads(1,1,1)] void k{i}(uniform RWStructuredBuffer<float> y)"
                           f" {{ y[0] = {i}.0; }}").compile("webgpu", f"k{i}").code

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(seen) and len(seen) == 8
    assert all(f"k{i}" in _text(results[i]) for i in range(8))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_makes_its_own_session(library, monkeypatch):
    monkeypatch.setenv("IRONACCEL_SLANG_CACHE", "0")
    _fresh(monkeypatch, True)
    SAXPY.compile("webgpu", "saxpy")
    parent = inprocess._session
    assert parent is not None and parent.pid == os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if it compiled in a session of its own
        status = 1
        try:
            compiler.clear_memory()
            code = SCALE.compile("webgpu", "scale").code
            session = inprocess._session
            status = 0 if session is not None and session.pid == os.getpid() and "scale" in _text(code) else 2
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert inprocess._session is parent
