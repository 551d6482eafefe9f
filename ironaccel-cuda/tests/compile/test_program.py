"""NVRTC on the CPU: PTX and CUBIN, options, name expressions, compile errors, arch handling, the caches."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("cuda.bindings.nvrtc")

from ironaccel import CompileError, InvalidArgument, Unsupported
from ironaccel_cuda import CompileOptions, ObjectCode, Program, cache
from ironaccel_cuda.program import normalize_arch, nvrtc_version, supported_archs


def _nvrtc_usable() -> bool:
    try:
        nvrtc_version()
        return True
    except Exception:
        return False


pytestmark = pytest.mark.skipif(not _nvrtc_usable(), reason="NVRTC (nvidia-cuda-nvrtc) is not installed")

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
template <typename T> __global__ void axpy(T a, const T* x, T* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""
ARCH = "sm_90"


def test_version_and_archs():
    major, minor = nvrtc_version()
    assert major >= 12
    archs = supported_archs()
    assert 90 in archs and list(archs) == sorted(archs)


def test_cubin(cache_dir):
    code = Program(SAXPY).compile("cubin", arch=ARCH)
    assert isinstance(code, ObjectCode) and code.kind == "cubin" and code.arch == "sm_90"
    assert code.code[:4] == b"\x7fELF" and b"saxpy" in code.code
    assert code.cache is None


def test_ptx(cache_dir):
    code = Program(SAXPY).compile("ptx", arch=(9, 0))
    assert code.kind == "ptx" and code.arch == "compute_90"
    text = code.code.decode()
    assert ".entry saxpy(" in text and ".target sm_90" in text


def test_name_expressions(cache_dir):
    code = Program(SAXPY, name_expressions=["axpy<float>", "axpy<double>"]).compile("cubin", arch=ARCH)
    assert set(code.name_map) == {"axpy<float>", "axpy<double>"}
    assert code.name_map["axpy<float>"].startswith("_Z") and code.name_map["axpy<float>"] != code.name_map[
        "axpy<double>"]
    assert code.name_map["axpy<float>"].encode() in code.code


def test_bad_name_expression(cache_dir):
    with pytest.raises(CompileError) as info:
        Program(SAXPY, name_expressions=["no_such_thing<int>"]).compile("cubin", arch=ARCH)
    assert info.value.op and info.value.log


def test_compile_error_carries_log(cache_dir):
    broken = 'extern "C" __global__ void k(float* p) { p[0] = undeclared_name; }'
    with pytest.raises(CompileError) as info:
        Program(broken, name="broken.cu").compile("ptx", arch=ARCH)
    err = info.value
    assert err.op == "nvrtcCompileProgram" and err.backend == "cuda"
    assert "undeclared_name" in err.log and "broken.cu" in err.log
    assert err.code_name == "NVRTC_ERROR_COMPILATION" and err.code == 6
    assert "undeclared_name" in str(err)
    assert not list(cache_dir.glob("*.bin")) if cache_dir.exists() else True  # failures are not cached


def test_options_reach_nvrtc(cache_dir):
    src = r"""
    #ifndef SCALE
    #error SCALE must be defined
    #endif
    #include "helper.h"
    extern "C" __global__ void k(float* p) { p[0] = SCALE * helper(); }
    """
    inc = cache_dir.parent / "inc"
    inc.mkdir()
    (inc / "helper.h").write_text("__device__ float helper() { return 2.0f; }\n")
    opts = CompileOptions(std="c++17", defines={"SCALE": "3.0f", "FLAG": None}, include_paths=[str(inc)],
                          fast_math=True, max_registers=32, line_info=True)
    code = Program(src, opts).compile("ptx", arch=ARCH)
    assert b".entry k(" in code.code
    with pytest.raises(CompileError) as info:
        Program(src, CompileOptions(include_paths=[str(inc)])).compile("ptx", arch=ARCH)
    assert "SCALE must be defined" in info.value.log
    debug = Program(SAXPY, CompileOptions(debug=True)).compile("ptx", arch=ARCH)
    assert b".debug" in debug.code or b"debug" in debug.code.lower()


def test_headers_mapping(cache_dir):
    src = '#include "consts.h"\nextern "C" __global__ void k(float* p) { p[0] = ANSWER; }\n'
    code = Program(src, headers={"consts.h": "#define ANSWER 42.0f\n"}).compile("ptx", arch=ARCH)
    assert b".entry k(" in code.code


def test_option_args():
    opts = CompileOptions(std="c++20", defines=["A", "B=2"], include_paths=["/x"], ftz=True, prec_div=False,
                          prec_sqrt=True, fmad=False, max_registers=64, line_info=True, debug=True,
                          extra=["--extra-device-vectorization"])
    assert opts.to_args() == [
        "--std=c++20", "-DA", "-DB=2", "--include-path=/x", "--ftz=true", "--prec-div=false", "--prec-sqrt=true",
        "--fmad=false", "--maxrregcount=64", "--generate-line-info", "--device-debug",
        "--extra-device-vectorization",
    ]
    assert CompileOptions().to_args() == []
    assert CompileOptions(fast_math=True).to_args() == ["--use_fast_math"]


@pytest.mark.parametrize("kwargs", [
    {"std": "c++99"}, {"std": 17}, {"fast_math": 1}, {"ftz": "yes"}, {"max_registers": 0}, {"max_registers": True},
    {"defines": "A=1"}, {"defines": ["1BAD"]}, {"defines": {"has space": 1}}, {"include_paths": "/x"},
    {"extra": "--foo"}, {"debug": None},
])
def test_bad_options(kwargs):
    with pytest.raises(InvalidArgument) as info:
        CompileOptions(**kwargs)
    assert info.value.op == "CompileOptions"


def test_bad_program_input():
    for args in [("",), ("   ",), (b"bytes",), (SAXPY, "not options")]:
        with pytest.raises(InvalidArgument):
            Program(*args)
    with pytest.raises(InvalidArgument):
        Program(SAXPY, name_expressions=[""])
    with pytest.raises(InvalidArgument):
        Program(SAXPY).compile("fatbin", arch=ARCH)


@pytest.mark.parametrize("arch,target,expected", [
    ("sm_90", "cubin", "sm_90"), ("90", "cubin", "sm_90"), (90, "cubin", "sm_90"), ("9.0", "cubin", "sm_90"),
    ((9, 0), "cubin", "sm_90"), ("sm_90a", "cubin", "sm_90a"), ("compute_80", "ptx", "compute_80"),
    ("sm_90", "ptx", "compute_90"),
])
def test_normalize_arch(arch, target, expected):
    assert normalize_arch(arch, target) == expected


def test_bad_arch():
    for arch in ("sm_xx", "hopper", True, (9,)):
        with pytest.raises(InvalidArgument):
            normalize_arch(arch, "cubin")
    with pytest.raises(Unsupported) as info:
        normalize_arch("sm_35", "cubin")  # older than this NVRTC supports
    assert "sm_35" in str(info.value)
    for arch, target in (("sm_999", "ptx"), ("sm_999", "cubin"), (max(supported_archs()) + 50, "ptx"),
                         ("compute_91", "ptx"), ("sm_91", "ltoir")):
        with pytest.raises(Unsupported) as info:  # never silently another architecture
            normalize_arch(arch, target)
        assert "it targets" in str(info.value)
    with pytest.raises(Unsupported):
        Program(SAXPY).compile("ptx", arch="sm_999")


class _FutureGpu:
    """What a Device newer than this NVRTC looks like to normalize_arch."""

    compute_capability = (99, 0)


def test_ptx_for_a_gpu_newer_than_nvrtc_targets_the_newest_it_knows():
    newest = max(supported_archs())
    assert normalize_arch(_FutureGpu(), "ptx") == f"compute_{newest}"
    with pytest.raises(Unsupported):
        normalize_arch(_FutureGpu(), "cubin")


# -- caches -----------------------------------------------------------------------


def test_a_precompiled_header_is_made_and_its_outcome_kept(cache_dir, tmp_path):
    """`--create-pch` writes the header on every compile (never served from the cache, which would skip the file)
    and the ObjectCode says what NVRTC did; compiles that ask for none carry None."""
    pch = tmp_path / "k.pch"
    src = 'extern "C" __global__ void k(float* p) { p[0] = 1.0f; }'
    opts = CompileOptions(extra=[f"--create-pch={pch}"])
    first = Program(src, opts).compile("ptx", arch=ARCH)
    assert first.pch in ("created", "not_attempted", "failed") and first.cache is None
    if first.pch == "created":
        assert pch.is_file()
        pch.unlink()
    again = Program(src, opts).compile("ptx", arch=ARCH)
    assert again.cache is None and again.pch == first.pch
    assert pch.is_file() == (first.pch == "created")
    assert Program(src).compile("ptx", arch=ARCH).pch is None
    assert again.replace(log="").pch == again.pch and again == again.replace()


def test_memory_cache(cache_dir):
    first = Program(SAXPY).compile("cubin", arch=ARCH)
    second = Program(SAXPY).compile("cubin", arch=ARCH)
    assert first.cache is None and second.cache == "memory"
    assert second.code == first.code


def test_disk_cache_survives_a_new_process(cache_dir):
    Program(SAXPY).compile("cubin", arch=ARCH)
    files = list(cache_dir.glob("*.bin"))
    assert len(files) == 1
    script = textwrap.dedent(
        f"""
        from ironaccel_cuda import Program
        code = Program({SAXPY!r}).compile("cubin", arch={ARCH!r})
        print(code.cache)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ),
                         check=True)
    assert out.stdout.strip() == "disk"


def test_disk_hit_in_a_new_process_loads_no_registry_and_no_binding(cache_dir):
    # What a fresh process pays for a disk hit: no pluggy, no plugin metadata read, no cuda.bindings, no numpy.
    Program(SAXPY).compile("cubin", arch=ARCH)
    script = textwrap.dedent(
        f"""
        import sys
        READS = []
        sys.addaudithook(lambda event, args: READS.append(str(args[0])) if event == "open" and str(args[0]).endswith(
            "entry_points.txt") else None)
        from ironaccel_cuda import Program
        code = Program({SAXPY!r}).compile("cubin", arch={ARCH!r})
        loaded = [m for m in ("pluggy", "numpy", "cuda", "cuda.bindings") if m in sys.modules]
        print(code.cache, loaded, READS[:3])
        """
    )
    # The first child records which NVRTC this environment loads (this process loaded it before cache_dir was
    # made); the second finds that record, as every later process does.
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env=dict(os.environ), check=True)
    assert out.stdout.strip() == "disk [] []", out.stdout + out.stderr


def test_cache_key_covers_every_input(cache_dir):
    Program(SAXPY).compile("cubin", arch=ARCH)
    variants = [
        Program(SAXPY + "\n// changed"),
        Program(SAXPY, CompileOptions(fast_math=True)),
        Program(SAXPY, name_expressions=["axpy<float>"]),
        Program(SAXPY, headers={"x.h": "int x;"}),
    ]
    for prog in variants:
        assert prog.compile("cubin", arch=ARCH).cache is None
    assert Program(SAXPY).compile("ptx", arch=ARCH).cache is None
    assert Program(SAXPY).compile("cubin", arch="sm_80").cache is None
    assert len(list(cache_dir.glob("*.bin"))) == 7


def _only_entry(cache_dir):
    files = list(cache_dir.glob("*.bin"))
    assert len(files) == 1
    return files[0]


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty", "header_only", "foreign_key"])
def test_damaged_disk_entry_is_a_miss_and_is_rewritten(cache_dir, damage):
    good = Program(SAXPY).compile("cubin", arch=ARCH)
    path = _only_entry(cache_dir)
    blob = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":
        path.write_bytes(blob[:-10] + bytes([blob[-10] ^ 0xFF]) + blob[-9:])
    elif damage == "garbage":
        path.write_bytes(os.urandom(len(blob)))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "header_only":
        path.write_bytes(blob[:40])
    else:  # a sound entry, but for another key
        other_key = "0" * 64
        meta = {"kind": "cubin", "arch": ARCH, "names": {}, "log": ""}
        path.write_bytes(cache.encode(other_key, meta, b"\x7fELFnot-this-one"))
    cache.clear_memory()
    again = Program(SAXPY).compile("cubin", arch=ARCH)
    assert again.cache is None and again.code == good.code  # recompiled, not the damaged bytes
    assert path.read_bytes() == blob  # and rewritten
    cache.clear_memory()
    assert Program(SAXPY).compile("cubin", arch=ARCH).cache == "disk"


def test_cache_disabled_by_env(cache_dir, monkeypatch):
    monkeypatch.setenv("IRONACCEL_CUDA_CACHE", "0")
    first = Program(SAXPY).compile("cubin", arch=ARCH)
    second = Program(SAXPY).compile("cubin", arch=ARCH)
    assert first.cache is None and second.cache is None
    assert not cache_dir.exists() or not list(cache_dir.iterdir())


def test_cache_dir_is_relocatable(cache_dir, tmp_path, monkeypatch):
    Program(SAXPY).compile("cubin", arch=ARCH)
    moved = tmp_path / "moved"
    cache_dir.rename(moved)
    monkeypatch.setenv("IRONACCEL_CUDA_CACHE_DIR", str(moved))
    cache.clear_memory()
    assert Program(SAXPY).compile("cubin", arch=ARCH).cache == "disk"


def test_unwritable_cache_dir_is_skipped(cache_dir, tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("IRONACCEL_CUDA_CACHE_DIR", str(blocker / "sub"))
    code = Program(SAXPY).compile("cubin", arch=ARCH)  # compiles, caches in memory only
    assert code.cache is None
    assert Program(SAXPY).compile("cubin", arch=ARCH).cache == "memory"


def test_writes_are_atomic(cache_dir):
    for i in range(5):
        Program(SAXPY + f"\n// {i}").compile("ptx", arch=ARCH)
    names = [p.name for p in cache_dir.iterdir()]
    assert len([n for n in names if n.endswith(".bin")]) == 5 and not [n for n in names if n.startswith(".tmp-")]


def test_cache_entry_format():
    meta = {"kind": "ptx", "arch": "compute_90", "names": {"a": "b"}, "log": "warn"}
    blob = cache.encode("k" * 64, meta, b"payload")
    got_meta, payload = cache.decode("k" * 64, blob)
    assert payload == b"payload" and got_meta["names"] == {"a": "b"}
    assert cache.decode("x" * 64, blob) is None
    for cut in range(0, len(blob)):
        assert cache.decode("k" * 64, blob[:cut]) is None


# -- source text, object code, LTO-IR ---------------------------------------------------------


@pytest.mark.parametrize("source", [SAXPY[:40] + "\0" + SAXPY[40:], SAXPY + "\udcff", "\0"])
def test_source_with_nul_or_lone_surrogate_is_refused(source, cache_dir):
    with pytest.raises(InvalidArgument) as info:
        Program(source)
    assert info.value.op == "nvrtcCreateProgram"
    for bad in ({"h.h": "int x;\0"}, {"h\udcff.h": "int x;"}):
        with pytest.raises(InvalidArgument):
            Program(SAXPY, headers=bad)
    with pytest.raises(InvalidArgument):
        Program(SAXPY, name_expressions=["axpy<float>\udcff"])


def test_non_ascii_source_compiles(cache_dir):
    code = Program("// \u00e9t\u00e9 \u2014 caf\u00e9\n" + SAXPY).compile("ptx", arch=ARCH)
    assert b".entry saxpy(" in code


def test_object_code_is_bytes(cache_dir):
    code = Program(SAXPY).compile("cubin", arch=ARCH)
    assert isinstance(code, bytes) and bytes(code) == code.code and len(code) == len(code.code)
    assert bytes(code)[:4] == b"\x7fELF" and memoryview(code)[:4].tobytes() == b"\x7fELF"
    assert code.replace(log="x").log == "x" and code.replace(log="x") != code
    with pytest.raises(AttributeError):
        code.kind = "ptx"
    import pickle

    again = pickle.loads(pickle.dumps(code))
    assert again == code and again.name_map == code.name_map and again.kind == "cubin"


def test_ltoir(cache_dir):
    code = Program(SAXPY).compile("ltoir", arch=ARCH)
    assert code.kind == "ltoir" and code.arch == "sm_90" and code[:4] == b"\xedCN\x7f"
    assert Program(SAXPY).compile("ltoir", arch=ARCH).cache == "memory"
    cache.clear_memory()
    assert Program(SAXPY).compile("ltoir", arch=ARCH).cache == "disk"


def test_compile_without_a_gpu_says_to_pass_arch(cache_dir):
    env = dict(os.environ, LD_LIBRARY_PATH="/nonexistent", CUDA_PYTHON_CUDA_PATH="/nonexistent")
    code = textwrap.dedent(f"""
        import ironaccel, ironaccel_cuda as cu
        try:
            cu.Program({SAXPY!r}).compile("ptx")
        except ironaccel.NotAvailable as exc:
            print("NotAvailable", exc.fix)
        else:
            print("compiled: there is a GPU here")
        print(len(cu.Program({SAXPY!r}).compile("ptx", arch="sm_90")) > 0)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()[:2]
    if first.startswith("NotAvailable"):
        assert "arch=" in first and "install the NVIDIA driver" not in first
    assert second == "True"


# -- a cache that cannot be poisoned ------------------------------------------------------------


def _forge(cache_dir):
    """Compile once, then replace the entry's PTX with other PTX and a valid checksum; returns the forged text."""
    import warnings

    warnings.simplefilter("always")
    Program(SAXPY).compile("ptx", arch=ARCH)
    (entry,) = [p for p in cache_dir.iterdir() if p.suffix == ".bin"]
    meta, payload = cache.decode(entry.stem, entry.read_bytes())
    forged = payload.replace(b"saxpy", b"evil_")
    entry.write_bytes(cache.encode(entry.stem, {k: v for k, v in meta.items() if k != "key"}, forged))
    cache.clear_memory()
    cache._warned.clear()
    return entry, forged


def _compile_warned():
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        first = Program(SAXPY).compile("ptx", arch=ARCH)
        cache.clear_memory()
        second = Program(SAXPY).compile("ptx", arch=ARCH)
    return first, second, [w for w in seen if issubclass(w.category, cache.CacheWarning)]


def test_forged_entry_in_a_writable_folder_is_ignored(cache_dir):
    entry, forged = _forge(cache_dir)
    assert Program(SAXPY).compile("ptx", arch=ARCH).code == forged  # trusted folder: the entry is used as it is
    cache.clear_memory()
    os.chmod(cache_dir, 0o777)
    try:
        first, second, warned = _compile_warned()
    finally:
        os.chmod(cache_dir, 0o700)
    assert first.cache is None and second.cache is None and b"evil_" not in first.code
    assert len(warned) == 1 and "writable by group or others" in str(warned[0].message)
    assert entry.read_bytes().count(forged) == 1  # neither read nor rewritten nor deleted


def test_forged_entry_writable_by_others_is_ignored(cache_dir):
    entry, forged = _forge(cache_dir)
    os.chmod(entry, 0o666)
    first, second, warned = _compile_warned()
    assert first.cache is None and b"evil_" not in first.code
    assert len(warned) == 1 and str(entry) in str(warned[0].message)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to another user needs root")
def test_forged_entry_owned_by_another_user_is_ignored(cache_dir):
    entry, forged = _forge(cache_dir)
    os.chown(entry, 65534, 65534)  # nobody
    first, second, warned = _compile_warned()
    assert first.cache is None and b"evil_" not in first.code
    assert len(warned) == 1 and "owned by another user" in str(warned[0].message)
    os.chown(cache_dir, 65534, 65534)
    cache._warned.clear()
    cache.clear_memory()
    first, second, warned = _compile_warned()
    assert first.cache is None and len(warned) == 1 and "folder owned by another user" in str(warned[0].message)


def test_cache_folders_are_created_private(cache_dir):
    Program(SAXPY).compile("ptx", arch=ARCH)
    assert cache_dir.stat().st_mode & 0o077 == 0
    assert all(p.stat().st_mode & 0o077 == 0 for p in cache_dir.iterdir())


def test_compiled_code_carries_its_kernels_parameter_types(cache_dir):
    from ironaccel_cuda import Program

    src = 'extern "C" __global__ void fill(unsigned* out, unsigned n, float v) { if (n) out[0] = (unsigned)v; }'
    code = Program(src).compile("cubin", arch="sm_90")
    assert dict(code.params) == {"fill": ("u64", "u32", "f32")}
    from ironaccel_cuda import cache

    cache.clear_memory()
    again = Program(src).compile("cubin", arch="sm_90")  # from the disk cache: the types came along
    assert again.cache == "disk" and dict(again.params) == {"fill": ("u64", "u32", "f32")}
    assert code.replace(log="x").params == code.params
    import pickle

    assert pickle.loads(pickle.dumps(code)) == code
