"""Import hygiene and the NotAvailable path (real on a machine without an NVIDIA driver)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import ironaccel
import ironaccel_cuda
from ironaccel import NotAvailable

PROBE = ironaccel.probe("cuda")
no_driver = pytest.mark.skipif(PROBE.available, reason="a CUDA driver and GPU are present here")


def test_import_loads_no_binding():
    code = textwrap.dedent(
        """
        import sys
        import ironaccel_cuda, ironaccel_cuda.plugin
        assert ironaccel_cuda.__version__
        names = ironaccel_cuda.__all__
        assert "Device" in names and "MemPool" in names and "Program" in names
        bad = [m for m in sys.modules if m.startswith("cuda")]
        assert not bad, bad
        import ironaccel
        ironaccel.registry.spec("cuda")
        bad = [m for m in sys.modules if m.startswith("cuda")]
        assert not bad, bad
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_lazy_names():
    assert ironaccel_cuda.Device.__name__ == "Device"
    assert ironaccel_cuda.clear_memory_cache.__name__ == "clear_memory"
    assert set(ironaccel_cuda.__all__) <= set(dir(ironaccel_cuda))
    with pytest.raises(AttributeError):
        ironaccel_cuda.NoSuchThing  # noqa: B018


@no_driver
def test_probe_says_why():
    assert not PROBE.available
    assert "libcuda.so.1" in PROBE.reason or "no CUDA" in PROBE.reason or "CUDA_ERROR" in PROBE.reason
    assert PROBE.fix and "driver" in PROBE.fix.lower()


@no_driver
def test_open_and_device_raise_not_available():
    with pytest.raises(NotAvailable) as info:
        ironaccel.open("cuda", 0)
    # asked for by name, so the message does not suggest skipping it with IRONACCEL_DISABLE (issue 41)
    assert info.value.reason == PROBE.reason and "IRONACCEL_DISABLE" not in str(info.value)
    with pytest.raises(NotAvailable) as direct:
        ironaccel_cuda.Device(0)
    assert direct.value.reason == PROBE.reason
    with pytest.raises(NotAvailable):
        ironaccel_cuda.device_count()
    with pytest.raises(NotAvailable):
        ironaccel.devices("cuda")


@no_driver
def test_compile_needs_a_device_only_for_the_default_arch(cache_dir):
    pytest.importorskip("cuda.bindings.nvrtc")
    try:
        ironaccel_cuda.nvrtc_version()
    except NotAvailable:
        pytest.skip("NVRTC is not installed")
    src = 'extern "C" __global__ void k(float* p) { p[0] = 1.0f; }'
    assert ironaccel_cuda.Program(src).compile("ptx", arch="sm_80").kind == "ptx"
    with pytest.raises(NotAvailable):
        ironaccel_cuda.Program(src).compile("ptx")
