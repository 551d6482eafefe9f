"""Linking through the driver's JIT linker (cuLink*): chosen where nvJitLink cannot load, or with backend="driver".

On the fake driver (tests/fakecuda/fake_link.c) the link checks inputs and options and returns a CUBIN holding the
inputs' kernel names; the kernels that run there are the fake's own.  On a GPU the linked code runs.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from helpers import FAKE
from helpers.kernels import LINK_CALLEE as CALLEE
from helpers.kernels import LINK_CALLER as CALLER

import ironaccel_cuda as cu
from ironaccel import ClosedError, CompileError, InvalidArgument, NotAvailable
from ironaccel_cuda import linker

pytestmark = pytest.mark.backend("cuda")

RDC = cu.CompileOptions(relocatable_device_code=True)


@pytest.fixture(scope="module")
def rdc_code():
    """The suite's kernels as a relocatable CUBIN (what a linker takes)."""
    from helpers.kernels import SOURCE

    return cu.Program(SOURCE, RDC).compile("cubin", arch=cu.Device(0))


@pytest.fixture
def no_nvjitlink(monkeypatch):
    """nvJitLink as if it could not load (the libnvJitLink wheel missing)."""

    def missing():
        raise NotAvailable("cuda", "nvJitLink (libnvJitLink) could not be loaded: (forced by the test)",
                           fix=linker.LINK_FIX)

    monkeypatch.setattr(linker, "_nvjitlink", missing)


def _saxpy(dev, code, a):
    mod = dev.load_module(code)
    fn = mod.function("saxpy")
    n = 1000
    x = np.arange(n, dtype=np.float32)
    dx, dy = dev.upload(x), dev.alloc(n, "float32")
    dy.memset(0)
    fn.launch(4, 256, a, dx, dy, n)
    y = dy.copy_to_host()
    for obj in (dx, dy, mod):
        obj.close()
    return x, y


@pytest.mark.parametrize("callee_kind", ["cubin", "ptx"])
def test_without_nvjitlink_linker_uses_the_driver(dev, no_nvjitlink, callee_kind):
    assert linker.link_backend() == "driver"
    caller = cu.Program(CALLER, RDC).compile("cubin", arch=dev)
    callee = cu.Program(CALLEE, RDC).compile(callee_kind, arch=dev)
    code = cu.Linker(caller, callee).link(arch=dev)
    assert code.kind == "cubin" and code.arch == dev.arch and bytes(code)[:4] == b"\x7fELF"
    if FAKE:
        assert code.log.startswith("fake cuLink: 2 inputs") and f"target={dev.arch[3:]}" in code.log
    x, y = _saxpy(dev, code, 3.0)
    np.testing.assert_allclose(y, (3 * x if FAKE else 6 * x))  # the fake's saxpy is its own: a * x + y
    again = cu.Linker(caller, callee).link(arch=dev)
    assert again.cache in ("memory", None) and bytes(again) == bytes(code)
    with pytest.raises(NotAvailable, match="nvJitLink"):
        cu.Linker(caller, callee, backend="nvjitlink").link(arch=dev)


def test_driver_backend_options_and_what_it_cannot_do(dev):
    caller = cu.Program(CALLER, RDC).compile("cubin", arch=dev)
    callee = cu.Program(CALLEE, RDC).compile("ptx", arch=dev)
    code = cu.Linker(caller, callee, options=["-O3", "-lineinfo", "-maxrregcount=64"], backend="driver").link(arch=dev)
    assert code.kind == "cubin"
    if FAKE:  # what reached cuLinkCreate
        for word in ("opt=3", "lineinfo=1", "maxreg=64", f"target={dev.arch[3:]}"):
            assert word in code.log, code.log
    with pytest.raises(InvalidArgument, match="cuLinkCreate.*-ftz=true.*no cuLink equivalent"):
        cu.Linker(caller, callee, options=["-ftz=true"], backend="driver").link(arch=dev)
    lto = cu.Program(CALLEE, RDC).compile("ltoir", arch=dev)
    with pytest.raises(NotAvailable, match="LTO-IR inputs need nvJitLink"):
        cu.Linker(caller, lto, backend="driver").link(arch=dev)
    with pytest.raises(InvalidArgument, match="backend must be"):
        cu.Linker(caller, backend="culink")


def test_driver_link_session_steps_and_errors(dev, rdc_code):
    session = linker.DriverLinkSession([f"-arch={dev.arch}"])
    assert session.handle is not None
    with pytest.raises(CompileError) as info:
        session.add("ptx", b"this is not PTX", "bad.ptx")
    # CUDA_ERROR_INVALID_PTX (218); driver 580 answers CUDA_ERROR_INVALID_IMAGE (200) with the JIT's log
    assert info.value.op == "cuLinkAddData" and info.value.code in (200, 218)
    with pytest.raises(NotAvailable, match="LTO-IR"):
        session.add("ltoir", b"\x7fNVVM", "x.ltoir")
    with pytest.raises(InvalidArgument, match="cannot link input of kind 'wasm'"):
        session.add("wasm", b"x", "x")
    with pytest.raises(InvalidArgument, match="data must be bytes"):
        session.add("cubin", "text", "x")
    session.add("cubin", bytes(rdc_code.code), "kernels.cubin")
    with pytest.raises(NotAvailable, match="CUBIN only"):
        session.complete("ptx")
    image = session.complete("cubin")
    assert image[:4] == b"\x7fELF"
    session.close()
    session.close()  # idempotent
    with pytest.raises(ClosedError, match="cuLinkAddData"):
        session.add("cubin", bytes(rdc_code.code), "again")
    mod = dev.load_module(image)
    mod.function("saxpy")
    mod.close()
    with pytest.raises(InvalidArgument, match="cuLinkCreate"):
        linker.DriverLinkSession(["--no-such-option"])


def test_driver_link_session_on_a_thread_with_no_current_context(dev, rdc_code):
    """cuLink links in a context: where the thread has none, device 0's primary context is made current around
    each call and released at close."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            session = linker.DriverLinkSession(["-arch=" + dev.arch])
            session.add("cubin", bytes(rdc_code.code), "kernels.cubin")
            out["image"] = session.complete()
            session.close()
        except Exception as exc:  # reported below, on the test's thread
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert "error" not in out, out.get("error")
    assert bytes(out["image"])[:4] == b"\x7fELF"  # type: ignore[index]


@pytest.mark.skipif(FAKE, reason="the fake linker resolves nothing")
def test_driver_link_reports_an_unresolved_symbol(dev):
    caller = cu.Program(CALLER, RDC).compile("cubin", arch=dev)
    with pytest.raises(CompileError) as info:
        cu.Linker(caller, backend="driver").link(arch=dev)  # scale() is defined nowhere
    assert info.value.op == "cuLinkComplete" and "scale" in info.value.log


@pytest.mark.skipif(FAKE, reason="the fake driver cannot run linked device functions")
def test_driver_link_with_the_device_runtime(dev):
    try:
        linker.device_runtime_library()
    except NotAvailable as exc:
        pytest.fail(f"libcudadevrt.a is needed for dynamic parallelism: {exc}")
    src = r"""
    extern "C" __global__ void child(unsigned* out) { out[threadIdx.x] = threadIdx.x + 1; }
    extern "C" __global__ void parent(unsigned* out) { if (threadIdx.x == 0) child<<<1, 32>>>(out); }
    """
    code = cu.Program(src, RDC).compile("cubin", arch=dev)
    linked = cu.Linker(code, device_runtime=True, backend="driver").link(arch=dev)
    mod = dev.load_module(linked)
    out = dev.alloc(32, "uint32")
    out.memset(0)
    mod.function("parent").launch(1, 1, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(1, 33, dtype=np.uint32))
    out.close()
    mod.close()
