"""Slang source on every ComputeDevice: one plain kernel, compiled per device, bound from slangc's reflection.

The GPU-side tests are marked with their backend: on CI (lavapipe, llvmpipe, wgpu on lavapipe) and on the H200
IRONACCEL_REQUIRE turns a skip -- a missing backend or a missing slangc -- into a failure.  The compiler-only
tests (CUDA C++ through NVRTC, Metal text, errors, the cache) need slangc alone: they fail instead of skipping
wherever IRONACCEL_REQUIRE names any backend.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

import ironaccel
from ironaccel import DType
from ironaccel.diskcache import CacheWarning
from ironaccel.errors import CompileError, InvalidArgument, NotAvailable, Unsupported
from ironaccel.testing.pytest_plugin import required_backends
from ironaccel_slang import Slang, compiler, find_slangc

GPU = [pytest.param(b, marks=pytest.mark.backend(b), id=b) for b in ("vulkan", "webgpu", "opengl", "cuda")]

SAXPY = Slang("""
struct Params { float a; uint n; };

[shader("compute")]
[numthreads(64, 1, 1)]
void saxpy(uint3 tid: SV_DispatchThreadID, uniform RWStructuredBuffer<float> y, uniform StructuredBuffer<float> x,
           uniform Params p)
{
    uint i = tid.x;
    if (i < p.n)
        y[i] = p.a * x[i] + y[i];
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
    out[0] = p.a; out[1] = float(p.n); out[2] = p.c.x; out[3] = p.c.y; out[4] = p.c.z;
    out[5] = p.inner.v.x; out[6] = p.inner.v.y; out[7] = float(p.inner.k);
    out[8] = float(p.arr[0]); out[9] = float(p.arr[1]); out[10] = float(p.arr[2]); out[11] = s;
}
""")
RICH_PARAMS = {"p": {"a": 1.5, "n": 7, "c": (2.0, 3.0, 4.0), "inner": {"v": (5.0, 6.0), "k": -8},
                     "arr": (9, 10, 11)}, "s": 12.5}
RICH_WANT = np.array([1.5, 7, 2, 3, 4, 5, 6, -8, 9, 10, 11, 12.5], np.float32)


@pytest.fixture
def device(request, slangc):
    dev = ironaccel.open(request.param, 0)
    try:
        yield dev
    finally:
        dev.close()


def saxpy(dev, n: int = 1000, a: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.integers(-100, 100, n).astype(np.float32)
    y = rng.integers(-100, 100, n).astype(np.float32)
    pipeline = dev.pipeline(SAXPY, "saxpy", buffers=2)
    ys, xs = dev.upload(y), dev.upload(x)
    dev.dispatch(pipeline, [ys, xs], (n + 63) // 64, {"p": {"a": a, "n": n}})
    got = dev.download(ys)
    ys.close()
    xs.close()
    return got, a * x + y


# -- on the devices -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", GPU, indirect=True)
def test_saxpy_with_a_typed_param_struct_is_exact(device):
    got, want = saxpy(device)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_interface_comes_from_the_reflection(device):
    pipeline = device.pipeline(SAXPY, "saxpy", buffers=2)
    bindings = pipeline.interface.bindings
    assert [(b.name, b.binding, b.element, b.writable) for b in bindings] == [
        ("y", 0, DType.FLOAT32, True), ("x", 1, DType.FLOAT32, False)]
    block = pipeline.interface.params
    assert block is not None and block.names == ("p",)
    assert [(f.name, f.offset, str(f.type)) for f in block.fields[0].type.fields] == [
        ("a", 0, "float32"), ("n", 4, "uint32")]
    assert pipeline.workgroup_size == (64, 1, 1) and pipeline.entry == "saxpy"
    # by name, as a numpy record of the block's dtype, or as a dataclass: the same bytes
    record = np.zeros((), block.numpy_dtype())
    record["p"]["a"], record["p"]["n"] = 3.0, 16

    @dataclass
    class P:
        a: float
        n: int

    @dataclass
    class Args:
        p: P

    assert block.pack(record) == block.pack({"p": {"a": 3.0, "n": 16}}) == block.pack(Args(P(3.0, 16)))


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_link_time_constants_default_and_set_per_pipeline(device):
    n = 100
    base = np.arange(n, dtype=np.float32)
    for constants, factor, offset in ((None, 3, 0.5), ({"FACTOR": 7}, 7, 0.5), ({"FACTOR": 2, "OFFSET": -1.0}, 2, -1)):
        pipeline = device.pipeline(SCALE, "scale", buffers=1, constants=constants)
        ys = device.upload(base)
        device.dispatch(pipeline, [ys], (n + 31) // 32, (n,))
        np.testing.assert_array_equal(device.download(ys), base * factor + np.float32(offset))
        ys.close()
    names = {c.name: (c.dtype, c.default) for c in pipeline.interface.constants}
    assert names == {"FACTOR": (DType.UINT32, 3), "OFFSET": (DType.FLOAT32, 0.5)}


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_nested_struct_vector_and_array_params_land_where_the_kernel_reads_them(device):
    pipeline = device.pipeline(RICH, "rich", buffers=1)
    out = device.alloc(12, "float32")
    device.dispatch(pipeline, [out], 1, RICH_PARAMS)
    np.testing.assert_array_equal(device.download(out), RICH_WANT)
    out.close()


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_bad_input_gets_typed_errors_and_the_device_stays_usable(device):
    with pytest.raises(CompileError) as info:
        device.pipeline(Slang("[shader(\"compute\")] [numthreads(1,1,1)] void k() { undefined_thing(); }"), "k",
                        buffers=0)
    assert "undefined_thing" in info.value.log and info.value.op == "slangc"
    with pytest.raises(InvalidArgument, match="no entry point 'nope'"):
        device.pipeline(SAXPY, "nope", buffers=2)
    with pytest.raises(InvalidArgument, match=r"takes 2 buffers \(y, x\)"):
        device.pipeline(SAXPY, "saxpy", buffers=3)
    with pytest.raises(InvalidArgument, match="declares no constant 'NOPE'"):
        device.pipeline(SCALE, "scale", buffers=1, constants={"NOPE": 1})
    with pytest.raises(InvalidArgument, match="FACTOR"):
        device.pipeline(SCALE, "scale", buffers=1, constants={"FACTOR": 1.5})
    with pytest.raises(InvalidArgument, match="FACTOR"):
        device.pipeline(SCALE, "scale", buffers=1, constants={"FACTOR": -1})
    pipeline = device.pipeline(SAXPY, "saxpy", buffers=2)
    ys, xs = device.upload(np.zeros(4, np.float32)), device.upload(np.zeros(4, np.float32))
    with pytest.raises(InvalidArgument, match="b"):
        device.dispatch(pipeline, [ys, xs], 1, {"p": {"a": 1.0, "b": 4}})  # a field the reflection does not list
    with pytest.raises(InvalidArgument):
        device.dispatch(pipeline, [ys, xs], 1, {"q": {"a": 1.0, "n": 4}})
    ys.close()
    xs.close()
    got, want = saxpy(device, 64)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_a_batch_recorded_once_is_resubmitted_with_params_rebound_by_name(device):
    if "batches" not in device.features:
        with pytest.raises(Unsupported):
            device.batch()
        return
    n = 256
    x = np.arange(n, dtype=np.float32)
    pipeline = device.pipeline(SAXPY, "saxpy", buffers=2)
    ys, xs = device.upload(np.zeros(n, np.float32)), device.upload(x)
    batch = device.batch()
    command = batch.dispatch(pipeline, [ys, xs], n // 64, {"p": {"a": 1.0, "n": n}})
    device.queue.submit(batch).wait()
    command.update(params={"p": {"a": 3.0, "n": n}})
    device.queue.submit(batch).wait()
    np.testing.assert_array_equal(device.download(ys), 4.0 * x)
    ys.close()
    xs.close()


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


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_a_generic_entry_point_specialized_per_type(device):
    for type_name, dtype, value in (("int", "int32", -7), ("uint", "uint32", 4000000000), ("float", "float32", 2.5)):
        pipeline = device.pipeline(FILL.specialized(type_name), "fill", buffers=1)
        assert pipeline.interface.bindings[0].element.value == dtype
        assert str(pipeline.interface.params.fields[0].type) == dtype
        out = device.alloc(100, dtype)
        device.dispatch(pipeline, [out], 2, {"value": value, "n": 100})
        np.testing.assert_array_equal(device.download(out), np.full(100, value, dtype))
        out.close()
    with pytest.raises(InvalidArgument):
        FILL.specialized("int; evil")


@pytest.mark.parametrize("device", GPU, indirect=True)
def test_global_parameters_are_refused_with_the_rule(device):
    source = Slang("""
RWStructuredBuffer<float> y;
[shader("compute")] [numthreads(1,1,1)]
void k(uint3 tid: SV_DispatchThreadID) { y[tid.x] = 1.0; }
""")
    with pytest.raises(Unsupported, match="uniform` parameter of the entry point"):
        device.pipeline(source, "k", buffers=1)


# -- the compiler alone ---------------------------------------------------------------------------------------

def test_cuda_output_compiles_with_nvrtc_and_its_arguments_match_the_block(slangc):
    pytest.importorskip("ironaccel_cuda")
    from ironaccel_cuda.program import Program

    compiled = RICH.compile("cuda", "rich")
    try:
        obj = Program(compiled.code, name_expressions=[compiled.entry]).compile("ptx", arch="sm_90")
    except NotAvailable as exc:
        if required_backends():
            raise
        pytest.skip(f"no NVRTC here: {exc}")
    ptx = bytes(obj.code).decode()
    params = re.search(rf"\.entry\s+{compiled.entry}\s*\(([^)]*)\)", ptx).group(1)
    declared = re.findall(r"\.param\s+(?:\.align\s+\d+\s+)?\.\w+\s+\w+?(?:\[(\d+)\])?\s*[,\n]", params + "\n")
    sizes = [int(s) if s else 4 for s in declared]
    block = compiled.kernel.block("c", "c")
    assert sizes == [8] + [f.type.size for f in block.fields]  # the buffer is one pointer; then p (56) and s (4)


def test_cuda_entry_point_is_the_name_slang_emits(slangc):
    main = Slang("[shader(\"compute\")] [numthreads(1,1,1)] void main(uint3 t: SV_DispatchThreadID, "
                 "uniform RWStructuredBuffer<float> y) { y[0] = 1.0; }")
    compiled = main.compile("cuda", "main")
    assert compiled.entry != "main" and f"void {compiled.entry}(" in str(compiled.code)


def test_metal_text(slangc):
    compiled = SAXPY.compile("metal", "saxpy")
    text = str(compiled.code)
    assert compiled.entry == "saxpy" and "[[kernel]]" in text
    assert re.search(r"\[\[buffer\(\d\)\]\]", text) and "thread_position_in_grid" in text
    assert [b.name for b in compiled.kernel.buffers] == ["y", "x"]


def test_each_target_is_text_or_spirv(slangc):
    spirv = SAXPY.compile("vulkan", "saxpy").code
    assert isinstance(spirv, bytes) and spirv[:4] == b"\x03\x02\x23\x07"
    words = np.frombuffer(spirv, np.uint32)
    i, opcodes = 5, []
    while i < len(words):
        opcodes.append(int(words[i] & 0xFFFF))
        i += int(words[i] >> 16)
    assert 3 not in opcodes  # no OpSource: the validation layer's SPIRV-Tools refuses Slang's source language
    wgsl = str(SAXPY.compile("webgpu", "saxpy").code)
    assert "@binding(0) @group(0) var<storage, read_write>" in wgsl and "@binding(2) @group(0) var<uniform>" in wgsl
    glsl = str(SAXPY.compile("opengl", "saxpy").code)
    assert "push_constant" not in glsl and "layout(std140, binding = 0) uniform" in glsl


def test_unknown_target_and_missing_entry(slangc):
    with pytest.raises(Unsupported, match="no Slang target"):
        SAXPY.compile("d3d12", "saxpy")
    with pytest.raises(InvalidArgument, match="no entry point 'nope'"):
        SAXPY.compile("vulkan", "nope")


def test_a_downstream_tool_the_compiler_lacks_is_a_compile_error(slangc):
    """-O2 on SPIR-V runs spirv-opt, which slangtorch's slangc does not ship: its log, in a CompileError."""
    try:
        compiled = Slang(SAXPY.source, options=("-O2",)).compile("vulkan", "saxpy")
    except CompileError as exc:
        assert exc.op == "slangc" and "spirv-opt" in exc.log
    else:  # a slangc with spirv-opt (the Vulkan SDK's)
        assert compiled.code[:4] == b"\x03\x02\x23\x07"


def test_constant_without_default_must_be_given(slangc):
    source = Slang("extern static const int K;\n[shader(\"compute\")] [numthreads(1,1,1)] void k(uint3 t: "
                   "SV_DispatchThreadID, uniform RWStructuredBuffer<int> y) { y[0] = K; }")
    with pytest.raises(InvalidArgument, match="'K' has no default"):
        source.compile("webgpu", "k")
    assert "= 5;" in str(source.compile("webgpu", "k", {"K": 5}).code) or source.compile("webgpu", "k", {"K": 5})


def test_without_a_compiler_slang_source_is_not_available(monkeypatch, tmp_path):
    monkeypatch.setenv("IRONACCEL_SLANGC", str(tmp_path / "no-slangc"))
    assert find_slangc() is None
    with pytest.raises(NotAvailable) as info:
        SAXPY.compile("vulkan", "saxpy")
    assert "pip install --no-deps slangtorch" in str(info.value)


def test_source_checks():
    with pytest.raises(InvalidArgument):
        Slang("x\0y")
    with pytest.raises(InvalidArgument):
        Slang(b"\x03\x02\x23\x07rest")
    with pytest.raises(InvalidArgument):
        Slang(42)  # type: ignore[arg-type]


# -- the cache ------------------------------------------------------------------------------------------------

def _runs(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = compiler._compile

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(compiler, "_compile", counted)
    return calls


def test_outputs_are_cached_in_memory_and_on_disk(slangc, slang_cache, monkeypatch):
    calls = _runs(monkeypatch)
    first = SAXPY.compile("webgpu", "saxpy")
    assert SAXPY.compile("webgpu", "saxpy") == first and len(calls) == 1  # memory
    compiler.clear_memory()
    assert SAXPY.compile("webgpu", "saxpy") == first and len(calls) == 1  # disk
    (entry,) = slang_cache.iterdir()
    assert os.stat(slang_cache).st_mode & 0o777 == 0o700
    SAXPY.compile("webgpu", "saxpy", {}) and SCALE.compile("webgpu", "scale", {"FACTOR": 4})
    assert len(calls) == 2  # other constants: another compile
    assert entry.exists()


def test_the_compilers_version_is_asked_once_then_read_from_the_disk_cache(tmp_path, slang_cache, monkeypatch):
    fake = tmp_path / "slangc"
    fake.write_text("#!/bin/sh\necho v2099.1.0\n")
    fake.chmod(0o755)
    asked = []
    real_run = compiler.subprocess.run

    def run(argv, **kw):
        asked.append(argv)
        return real_run(argv, **kw)

    monkeypatch.setattr(compiler.subprocess, "run", run)
    monkeypatch.setattr(compiler, "_ids", {})
    first = compiler.compiler_id(str(fake))
    assert first.startswith("v2099.1.0 ") and len(asked) == 1
    compiler._ids.clear()  # a new process: only the disk cache remembers
    assert compiler.compiler_id(str(fake)) == first and len(asked) == 1
    os.utime(fake, ns=(1, 10**18))  # another build in its place: asked again
    compiler._ids.clear()
    assert compiler.compiler_id(str(fake)) != first and len(asked) == 2
    monkeypatch.setenv("IRONACCEL_SLANG_CACHE", "0")  # cache off: asked each process
    compiler._ids.clear()
    compiler.compiler_id(str(fake))
    assert len(asked) == 3


def _forge(folder):
    """Replace the one entry's code with other code and a sound checksum (what a local attacker would plant)."""
    SAXPY.compile("webgpu", "saxpy")
    (entry,) = folder.iterdir()
    meta, payload = compiler.CACHE.decode(entry.stem, entry.read_bytes())
    forged = payload.replace(b"p.a", b"0.0").replace(b"saxpy", b"evil_")
    entry.write_bytes(compiler.CACHE.encode(entry.stem, {k: v for k, v in meta.items() if k != "key"}, forged))
    compiler.clear_memory()
    compiler.CACHE._warned.clear()
    return entry


def test_a_planted_entry_writable_by_others_is_ignored_with_a_warning(slangc, slang_cache):
    entry = _forge(slang_cache)
    os.chmod(entry, 0o666)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        compiled = SAXPY.compile("webgpu", "saxpy")
    assert compiled.entry == "saxpy" and "evil_" not in str(compiled.code)
    assert any(issubclass(w.category, CacheWarning) and "writable by group or others" in str(w.message) for w in seen)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_a_planted_entry_of_another_user_is_ignored(slangc, slang_cache):
    entry = _forge(slang_cache)
    os.chown(entry, 65534, 65534)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        compiled = SAXPY.compile("webgpu", "saxpy")
    assert "evil_" not in str(compiled.code)
    assert any("owned by another user" in str(w.message) for w in seen)


def test_a_corrupt_entry_is_a_miss_and_is_rewritten(slangc, slang_cache, monkeypatch):
    SAXPY.compile("webgpu", "saxpy")
    (entry,) = slang_cache.iterdir()
    entry.write_bytes(entry.read_bytes()[:-7])
    compiler.clear_memory()
    calls = _runs(monkeypatch)
    assert SAXPY.compile("webgpu", "saxpy").entry == "saxpy" and len(calls) == 1
    assert compiler.CACHE.decode(entry.stem, entry.read_bytes()) is not None
