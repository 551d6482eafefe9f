"""Bad input: each test is one defect that let a raw Python error (or a wrong answer) out of a public call."""

from __future__ import annotations

import types

import pytest

from ironaccel.errors import InvalidArgument, NotAvailable
from ironaccel.probing import loaded_library
from ironaccel.types import DeviceDescriptor
from ironaccel_rocm import backend as backend_module
from ironaccel_rocm import binding, compiler, hiprtc
from ironaccel_rocm.backend import Backend
from ironaccel_rocm.compiler import CodeObject, Program, amdgpu_mach
from ironaccel_rocm.device import HipDevice

try:
    RTC = hiprtc.load()
except NotAvailable as exc:  # pragma: no cover - depends on the machine
    RTC = None
    WHY = exc.reason
else:
    WHY = ""

needs_hiprtc = pytest.mark.skipif(RTC is None, reason=f"hipRTC unavailable: {WHY}")

SOURCE = 'extern "C" __global__ void k(int* y) { y[0] = 1; }'
CREATE, COMPILE = "hiprtcCreateProgram", "hiprtcCompileProgram"


def _refused(call, op: str, *words: str) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as info:
        call()
    assert info.value.op == op and op in str(info.value)
    for word in words:
        assert word in info.value.detail
    return info.value


def test_source_with_a_lone_surrogate() -> None:
    """Was UnicodeEncodeError from source.encode()."""
    _refused(lambda: Program("__global__ void k() {}\ud800"), CREATE, "source", "UTF-8")


@pytest.mark.parametrize("options", [None, 5, 3.0, True])
def test_options_that_are_not_a_sequence(options) -> None:
    """Was TypeError: '... object is not iterable'."""
    _refused(lambda: Program(SOURCE, options), CREATE, "options must be a sequence of str")


def test_option_with_a_lone_surrogate_is_refused_up_front() -> None:
    """Was accepted, then UnicodeEncodeError out of compile()."""
    _refused(lambda: Program(SOURCE, ["-DX=\ud800"]), CREATE, "UTF-8")


def test_options_from_a_generator_are_kept() -> None:
    """Were read once by the type check and lost: the program compiled with no options."""
    assert Program(SOURCE, (o for o in ["-O3", "-DX=1"])).options == ("-O3", "-DX=1")


@pytest.mark.parametrize("name, words", [(None, ["name must be a str"]), (42, ["name must be a str"]),
                                         (b"k.hip", ["name must be a str"]), ("k\ud800.hip", ["UTF-8"]),
                                         ("k\0.hip", ["NUL"])])
def test_program_name_is_checked(name, words) -> None:
    """Was accepted, then AttributeError/UnicodeEncodeError out of compile(), or cut at the NUL by hipRTC."""
    _refused(lambda: Program(SOURCE, name=name), CREATE, *words)


@pytest.mark.parametrize("headers, word", [
    ([("a.h", "int x;")], "mapping"), ("a.h", "mapping"), ({1: "int x;"}, "header name"),
    ({b"a.h": "int x;"}, "header name"), ({"a.h": None}, "str or bytes"), ({"a.h": 5}, "str or bytes"),
    ({"a.h": [1, 2]}, "str or bytes"), ({"a.h": "\ud800"}, "UTF-8"), ({"a\ud800.h": "int x;"}, "UTF-8"),
    ({"a.h": "int x;\0"}, "NUL"), ({"a\0.h": "int x;"}, "NUL"), ({"a.h": b"int x;\0"}, "NUL"),
])
def test_headers_are_checked(headers, word) -> None:
    """Was AttributeError/TypeError/UnicodeEncodeError, or silently wrong headers (5 -> five NUL bytes)."""
    _refused(lambda: Program(SOURCE, headers=headers), CREATE, word)


def test_valid_headers_still_work() -> None:
    program = Program(SOURCE, headers={"a.h": "int x;", "b.h": b"int y;", "c.h": bytearray(b"int z;")})
    assert program.headers == {"a.h": b"int x;", "b.h": b"int y;", "c.h": b"int z;"}


def test_arch_with_a_final_newline_never_reaches_hiprtc(monkeypatch: pytest.MonkeyPatch) -> None:
    """The arch regex ended in "$", which matches before a final newline: with no ISA list from comgr,
    'gfx90a\\n' went to hipRTC (which aborts on a target it does not know)."""
    fake = hiprtc.Hiprtc(lib=None, path="fake", version=(0, 0), supported_isas=None)  # type: ignore[arg-type]
    monkeypatch.setattr(compiler.hiprtc, "load", lambda: fake)

    def reached(*args: object) -> CodeObject:
        raise AssertionError("the arch reached hipRTC")

    monkeypatch.setattr(compiler, "_compile", reached)
    for arch in ("gfx90a\n", "gfx90a:xnack+\n"):
        _refused(lambda arch=arch: Program(SOURCE).compile(arch), COMPILE, "arch must be one GPU name")


@needs_hiprtc
@pytest.mark.parametrize("options", [None, 5, ["-DX=\ud800"]])
def test_compile_options_are_checked(options) -> None:
    """Was TypeError (not iterable) or UnicodeEncodeError from compile(arch, options=...)."""
    _refused(lambda: Program(SOURCE).compile("gfx90a", options=options), COMPILE)


@needs_hiprtc
def test_compile_options_from_a_generator_are_kept() -> None:
    code = Program(SOURCE).compile("gfx90a", options=(o for o in ["-DX=1"]))
    assert code.options == ("--offload-arch=gfx90a", "-DX=1")


@pytest.mark.parametrize("elf", [None, 5, "x" * 64, [0] * 64])
def test_amdgpu_mach_of_something_that_is_not_bytes(elf) -> None:
    """Was TypeError (len(None), str.startswith(bytes)) or AttributeError."""
    _refused(lambda: amdgpu_mach(elf), "amdgpu_mach", "elf must be bytes")


def test_amdgpu_mach_of_a_memoryview() -> None:
    """Was AttributeError: 'memoryview' object has no attribute 'startswith'."""
    assert amdgpu_mach(memoryview(bytes(64))) is None


@pytest.mark.parametrize("args", [(None, "gfx90a", "", ()), (5, "gfx90a", "", ()), ("text", "gfx90a", "", ()),
                                  (b"\x7fELF", None, "", ()), (b"\x7fELF", "gfx90a", None, ()),
                                  (b"\x7fELF", "gfx90a", "", "-O3"), (b"\x7fELF", "gfx90a", "", (3,))])
def test_code_object_constructor_checks_its_arguments(args) -> None:
    """Was TypeError (bytes(None)), or a wrong object (CodeObject(5, ...) was five NUL bytes; arch=None kept)."""
    _refused(lambda: CodeObject(*args), "CodeObject")


def test_hip_device_constructor_checks_its_arguments() -> None:
    """Was AttributeError: 'NoneType' object has no attribute 'hipSetDevice'."""
    hip = types.ModuleType("fake_hip")
    _refused(lambda: HipDevice(None, None), "hipSetDevice", "DeviceDescriptor")  # type: ignore[arg-type]
    _refused(lambda: HipDevice(hip, "gfx90a"), "hipSetDevice", "DeviceDescriptor")  # type: ignore[arg-type]
    _refused(lambda: HipDevice(hip, DeviceDescriptor("cuda", 0, "an NVIDIA GPU")), "hipSetDevice", "'cuda'")


def test_hiprtc_library_without_the_hiprtc_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    """A library that loads but lacks the symbols: was AttributeError 'undefined symbol: hiprtcCreateProgram'."""
    libc = loaded_library("libc.so")
    assert libc, "libc is not mapped in this process"
    monkeypatch.setenv(hiprtc.ENV_LIBRARY, libc)
    hiprtc.reset()
    try:
        with pytest.raises(NotAvailable) as info:
            Program(SOURCE).compile("gfx90a")
    finally:
        hiprtc.reset()
    assert "does not export hiprtcCreateProgram" in info.value.reason and libc in info.value.reason


@pytest.mark.skipif(RTC is None or RTC.valid_target("gfx90a") is None, reason="libamd_comgr cannot check targets")
def test_valid_target_with_bad_text() -> None:
    """'gfx90a\\0junk' was answered for 'gfx90a' (True); a lone surrogate raised UnicodeEncodeError."""
    assert RTC is not None
    assert RTC.valid_target("gfx90a\0junk") is False
    assert RTC.valid_target("gfx90a\ud800") is False
    _refused(lambda: RTC.valid_target(None), "amd_comgr_get_isa_metadata")  # type: ignore[arg-type]


class _Hip(types.ModuleType):
    """hip-python's calling convention: a tuple led by the error code."""

    def __init__(self, runtime_error: int = 0, drop: str = ""):
        super().__init__("fake_hip")
        self.runtime_error = runtime_error
        if drop:
            setattr(self, drop, None)

    def hipRuntimeGetVersion(self):
        return (self.runtime_error, 50_221_153)

    def hipDriverGetVersion(self):
        return (0, 50_221_153)

    def hipGetDeviceCount(self):
        return (0, 1)

    def hipGetDeviceProperties(self, ordinal: int):
        return (0, types.SimpleNamespace(name=b"AMD Instinct MI210", gcnArchName=b"gfx90a"))

    def hipDeviceCanAccessPeer(self, a: int, b: int):
        return (0, 0)


def _probe_with(monkeypatch: pytest.MonkeyPatch, hip: types.ModuleType):
    monkeypatch.setattr(binding, "load", lambda: hip)
    monkeypatch.setattr(backend_module.binding, "load", lambda: hip)
    return Backend().probe()


def test_probe_when_the_runtime_version_call_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Was a DriverError raised out of probe(), which never raises for an unusable backend."""
    result = _probe_with(monkeypatch, _Hip(runtime_error=1))
    assert not result.available and result.reason.startswith("hipRuntimeGetVersion failed")
    assert result.code == 1


@pytest.mark.parametrize("missing", ["hipRuntimeGetVersion", "hipDriverGetVersion", "hipGetDeviceCount",
                                     "hipGetDeviceProperties", "hipDeviceCanAccessPeer"])
def test_probe_with_a_hip_python_that_lacks_a_function(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    """Was TypeError/AttributeError out of probe() ('NoneType' object is not callable)."""
    hip = _Hip(drop=missing)
    if missing == "hipDeviceCanAccessPeer":
        hip.hipGetDeviceCount = lambda: (0, 2)  # type: ignore[method-assign]  # peers are asked only with two
    result = _probe_with(monkeypatch, hip)
    assert not result.available and f"has no hip.{missing}" in result.reason
    assert "ironaccel-rocm[hip]" in result.fix
