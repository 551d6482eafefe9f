"""On the CPU: device-code images checked before the driver sees them; linking with nvJitLink."""

from __future__ import annotations

import glob
import os
import shutil
import struct
import subprocess

import pytest

pytest.importorskip("cuda.bindings.nvrtc")

from ironaccel import CompileError, InvalidArgument
from ironaccel_cuda import CompileOptions, Linker, Program, cache
from ironaccel_cuda.images import check_image, cubin_sm
from ironaccel_cuda.program import nvrtc_version

try:
    nvrtc_version()
except Exception as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"NVRTC is not installed: {exc}", allow_module_level=True)

SRC = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}"""
ARCH = "sm_90"


@pytest.fixture(scope="module")
def cubin() -> bytes:
    return bytes(Program(SRC).compile("cubin", arch=ARCH))


def _fatbinary() -> str | None:
    found = shutil.which("fatbinary") or next(iter(sorted(glob.glob("/usr/local/cuda*/bin/fatbinary"))), None)
    return found


@pytest.fixture(scope="module")
def fatbin(cubin, tmp_path_factory) -> bytes:
    tool = _fatbinary()
    if tool is None:
        pytest.skip("no fatbinary tool (CUDA toolkit) to build a fatbin with")
    folder = tmp_path_factory.mktemp("fatbin")
    (folder / "k.cubin").write_bytes(cubin)
    (folder / "k.ptx").write_bytes(bytes(Program(SRC).compile("ptx", arch=ARCH)))
    out = folder / "k.fatbin"
    subprocess.run([tool, "--64", f"--create={out}", f"--image3=kind=elf,sm=90,file={folder / 'k.cubin'}",
                    f"--image3=kind=ptx,sm=90,file={folder / 'k.ptx'}"], check=True)
    return out.read_bytes()


def test_sound_images_pass(cubin, fatbin):
    assert check_image(cubin, "op") == "cubin" and cubin_sm(cubin) == 90
    assert check_image(fatbin, "op") == "fatbin"
    ptx = bytes(Program(SRC).compile("ptx", arch=ARCH))
    assert check_image(ptx, "op") == "ptx" and check_image(ptx.rstrip(b"\0"), "op") == "ptx"
    assert check_image(bytes(Program(SRC).compile("ltoir", arch=ARCH)), "op") == "ltoir"


def test_every_truncation_of_a_cubin_is_refused(cubin):
    for cut in sorted({*range(0, 200, 7), *range(200, len(cubin), max(1, len(cubin) // 97)), len(cubin) - 1}):
        with pytest.raises(InvalidArgument):
            check_image(cubin[:cut], "cuModuleLoadData")


def test_every_truncation_of_a_fatbin_is_refused(fatbin):
    for cut in sorted({*range(4, 120, 5), *range(120, len(fatbin), max(1, len(fatbin) // 97)), len(fatbin) - 1}):
        with pytest.raises(InvalidArgument):
            check_image(fatbin[:cut], "cuModuleLoadData")


def _patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def test_garbled_cubin_headers_are_refused(cubin):
    shoff, = struct.unpack_from("<Q", cubin, 40)
    garbled = [
        _patched(cubin, 4, "<B", 1),  # 32-bit class
        _patched(cubin, 18, "<H", 62),  # x86-64, not CUDA
        _patched(cubin, 40, "<Q", len(cubin)),  # section table past the end
        _patched(cubin, 60, "<H", 0xFFFF),  # absurd section count
        _patched(cubin, 62, "<H", 0xFFF0),  # section-name index past the table
        _patched(cubin, 58, "<H", 40),  # wrong section entry size
        _patched(cubin, 32, "<Q", len(cubin) - 8),  # program headers past the end
        _patched(cubin, shoff + 64 + 24, "<Q", len(cubin)),  # section 1's offset past the end
        _patched(cubin, shoff + 64 + 32, "<Q", 1 << 40),  # section 1's size enormous
    ]
    for i, image in enumerate(garbled):
        with pytest.raises(InvalidArgument):
            check_image(image, "cuModuleLoadData")
        assert i >= 0


def test_garbled_fatbin_headers_are_refused(fatbin):
    for image in (_patched(fatbin, 4, "<H", 2), _patched(fatbin, 8, "<Q", len(fatbin)),
                  _patched(fatbin, 16 + 4, "<I", 3), _patched(fatbin, 16 + 8, "<Q", len(fatbin)),
                  _patched(fatbin, 16, "<H", 0), fatbin[:16] + bytes(len(fatbin) - 16)):
        with pytest.raises(InvalidArgument):
            check_image(image, "cuModuleLoadData")


def test_not_an_image_is_refused():
    for junk in (b"", b"\x00" * 64, b"hello world", "é".encode("latin-1") * 10, b".version 8.0\n.target sm_90\0x",
                 os.urandom(256)):
        with pytest.raises(InvalidArgument):
            check_image(junk, "cuModuleLoadData")


# -- nvJitLink -----------------------------------------------------------------------------


def _nvjitlink():
    try:
        from ironaccel_cuda.linker import _nvjitlink

        _nvjitlink()
    except Exception as exc:
        pytest.skip(f"nvJitLink is not installed: {exc}")


RDC = CompileOptions(relocatable_device_code=True)
CALLER = r"""extern "C" __device__ float scale(float x);
extern "C" __global__ void k(float* p) { p[threadIdx.x] = scale(p[threadIdx.x]); }"""
CALLEE = r"""extern "C" __device__ float scale(float x) { return 2.0f * x; }"""


def test_nvjitlink_module_and_logs(monkeypatch):
    """nvjitlink() / nvjitlink_log(): the loaded binding for code that drives nvJitLink itself, and a handle's logs."""
    _nvjitlink()
    from ironaccel import NotAvailable
    from ironaccel_cuda import linker

    nv = linker.nvjitlink()
    h = nv.create(1, ["-arch=sm_90"])
    try:
        assert linker.nvjitlink_log(h) == linker.nvjitlink_log(h, error=True) == ""  # nothing added yet
        with pytest.raises(nv.nvJitLinkError):
            nv.add_data(h, nv.InputType.PTX, b"not ptx\0", 8, "bad")
        assert "bad" in linker.nvjitlink_log(h, error=True)  # the input's name, in nvJitLink's own words
    finally:
        nv.destroy(h)
    assert linker.nvjitlink_log(None) == ""  # not a handle: no log

    def missing():
        raise NotAvailable("cuda", "no nvJitLink here")

    monkeypatch.setattr(linker, "_nvjitlink", missing)
    with pytest.raises(NotAvailable):
        linker.nvjitlink()


def test_link_cubin_ptx_ltoir(cache_dir):
    _nvjitlink()
    caller = Program(CALLER, RDC).compile("cubin", arch=ARCH)
    for callee in (Program(CALLEE, RDC).compile("cubin", arch=ARCH), Program(CALLEE, RDC).compile("ptx", arch=ARCH)):
        code = Linker(caller, callee).link(arch=ARCH)
        assert code.kind == "cubin" and cubin_sm(code) == 90 and check_image(code, "op") == "cubin"
        assert b"scale" in code and b"k" in code
    lto = Linker(Program(CALLER).compile("ltoir", arch=ARCH), Program(CALLEE).compile("ltoir", arch=ARCH))
    assert lto.lto
    assert lto.link(arch=ARCH).kind == "cubin"
    ptx = lto.link("ptx", arch=ARCH)
    assert ptx.kind == "ptx" and ptx.arch == "compute_90" and b".entry k" in ptx


def test_link_results_are_cached(cache_dir):
    _nvjitlink()
    inputs = (Program(CALLER, RDC).compile("cubin", arch=ARCH), Program(CALLEE).compile("ltoir", arch=ARCH))
    first = Linker(*inputs).link(arch=ARCH)
    assert first.cache is None
    assert Linker(*inputs).link(arch=ARCH).cache == "memory"
    cache.clear_memory()
    assert Linker(*inputs).link(arch=ARCH).cache == "disk"
    assert bytes(Linker(*inputs).link(arch=ARCH)) == bytes(first)
    assert Linker(*inputs, options=["-O0"]).link(arch=ARCH).cache is None  # options are in the key


def test_link_with_the_device_runtime_on_the_cpu(cache_dir):
    _nvjitlink()
    from ironaccel_cuda.linker import device_runtime_library

    try:
        device_runtime_library()
    except Exception as exc:
        pytest.skip(f"libcudadevrt.a is not installed: {exc}")
    src = r"""extern "C" __global__ void child(int* p) { p[0] = 1; }
    extern "C" __global__ void parent(int* p) { child<<<1, 1>>>(p); }"""
    code = Linker(Program(src, RDC).compile("cubin", arch=ARCH), device_runtime=True).link(arch=ARCH)
    assert len(code) > 10_000  # the device runtime's code is in


def test_link_errors_are_typed(cache_dir):
    _nvjitlink()
    caller = Program(CALLER, RDC).compile("ltoir", arch=ARCH)
    with pytest.raises(CompileError) as info:
        Linker(caller).link(arch=ARCH)
    assert "scale" in info.value.log
    other = Program(CALLEE, RDC).compile("cubin", arch="sm_80")
    with pytest.raises(InvalidArgument) as info:
        Linker(Program(CALLER, RDC).compile("cubin", arch=ARCH), other).link(arch=ARCH)
    assert "sm_80" in str(info.value)
    for bad in ((), (b"junk",), (3,), ("/no/such/file.cubin",)):
        with pytest.raises(InvalidArgument):
            Linker(*bad)
    with pytest.raises(InvalidArgument):
        Linker(caller, options="-O3")
