"""Compile for the device, load modules every way, functions, attributes, occupancy, launches and their bad input."""

from __future__ import annotations

import struct
import subprocess
import threading

import numpy as np
import pytest
from helpers import FAKE
from helpers.cbuild import fatbinary as _fatbinary
from helpers.kernels import SOURCE

import ironaccel_cuda as cu
from ironaccel import ClosedError, DriverError, InvalidArgument

pytestmark = pytest.mark.backend("cuda")

rng = np.random.default_rng(7)


def saxpy_buffers(dev, n):
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    return x, y, dev.upload(x), dev.upload(y)


def test_default_arch_is_the_device(dev):
    code = cu.Program(SOURCE).compile()  # cubin for the current device
    assert code.kind == "cubin" and code.arch == dev.arch
    assert code.code[:4] == b"\x7fELF"


@pytest.mark.parametrize("name", ["saxpy", "templated::saxpy<float>"])
def test_saxpy(dev, kernels, name):
    n = 100_003
    fn = kernels.function(name)
    x, y, dx, dy = saxpy_buffers(dev, n)
    fn.launch((n + 255) // 256, 256, np.float32(2.5), dx, dy, np.uint32(n))
    np.testing.assert_allclose(dy.copy_to_host(), np.float32(2.5) * x + y, rtol=1e-5, atol=1e-6)
    fn.launch((n + 255) // 256, (256, 1, 1), 1.0, dx, dy, n)  # Python float and int fit float and unsigned
    np.testing.assert_allclose(dy.copy_to_host(), np.float32(2.5) * x + y + x, rtol=1e-5, atol=1e-6)
    dx.close()
    dy.close()


def test_function_lookup(dev, kernels):
    assert kernels.function("saxpy") is kernels.function("saxpy")
    with pytest.raises(DriverError) as info:
        kernels.function("no_such_kernel")
    assert info.value.op == "cuModuleGetFunction" and "no_such_kernel" in str(info.value)
    for bad in (["saxpy"], "", 7):
        with pytest.raises(InvalidArgument):
            kernels.function(bad)


def test_attributes_and_occupancy(dev, kernels):
    fn = kernels.function("saxpy")
    attrs = fn.attributes
    assert attrs.registers > 0 and attrs.max_threads_per_block > 0 and attrs.num_params == 4
    assert attrs.shared_bytes >= 0 and attrs.max_dynamic_shared_bytes >= 0
    blocks = fn.max_active_blocks_per_sm(256)
    assert 1 <= blocks <= 64
    assert fn.param_layout() == ((0, 4), (8, 8), (16, 8), (24, 4))
    # any CUfunction, by handle: the same layout (an address or the cuda.bindings object)
    assert cu.function_param_layout(fn.handle) == cu.function_param_layout(fn.handle, strict=True) == fn.param_layout()
    from cuda.bindings import driver

    assert cu.function_param_layout(driver.CUfunction(fn.handle)) == fn.param_layout()
    for bad in ("saxpy", 1.5, True, None):
        with pytest.raises(InvalidArgument) as info:
            cu.function_param_layout(bad)
        assert info.value.op == "cuFuncGetParamInfo"
    with pytest.raises(InvalidArgument):
        fn.max_active_blocks_per_sm(0)
    fn.set_max_dynamic_shared(1024)


def test_load_from_bytes_and_file(dev, kernel_code, tmp_path):
    mod = dev.load_module(kernel_code.code)  # raw CUBIN bytes: no name map, symbols only
    assert mod.kind == "cubin"
    mod.function("saxpy")
    mod.close()
    path = tmp_path / "kernels.cubin"
    path.write_bytes(kernel_code.code)
    mod = dev.load_module(path)
    mod.function("scale_offset")
    mod.close()
    mod = dev.load_module(str(path))
    mod.close()
    with pytest.raises(InvalidArgument):
        dev.load_module(tmp_path / "missing.cubin")
    with pytest.raises(InvalidArgument):
        dev.load_module(b"")
    with pytest.raises(DriverError) as info:
        dev.load_module(b"not ptx at all")
    assert info.value.op == "cuModuleLoadData"


def test_load_fatbin(dev, kernel_code, tmp_path):
    tool = _fatbinary()
    if tool is None:
        pytest.skip("no fatbinary tool (CUDA toolkit) to build a fatbin with")
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(kernel_code.code)
    fatbin = tmp_path / "k.fatbin"
    major, minor = dev.compute_capability
    subprocess.run([tool, "--64", f"--create={fatbin}", f"--image3=kind=elf,sm={major}{minor},file={cubin}"],
                   check=True)
    assert fatbin.read_bytes()[:4] == b"\x50\xed\x55\xba"
    mod = dev.load_module(fatbin)
    assert mod.kind == "fatbin"
    n = 512
    x, y, dx, dy = saxpy_buffers(dev, n)
    mod.function("saxpy").launch(2, 256, 0.5, dx, dy, n)
    np.testing.assert_allclose(dy.copy_to_host(), 0.5 * x + y, rtol=1e-5, atol=1e-6)
    mod.close()
    dx.close()
    dy.close()


def test_ptx(dev):
    ptx = cu.Program(SOURCE).compile("ptx")
    assert ptx.kind == "ptx" and ptx.arch.startswith("compute_") and b".entry" in ptx.code
    try:
        mod = dev.load_module(ptx)
    except DriverError as exc:  # PTX from a newer NVRTC than the driver: the documented limitation
        assert exc.op == "cuModuleLoadData"
        assert exc.code_name in ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_INVALID_PTX")
        assert "CUBIN" in str(exc)
        return
    n = 1000
    x, y, dx, dy = saxpy_buffers(dev, n)
    mod.function("saxpy").launch(4, 256, 3.0, dx, dy, n)
    np.testing.assert_allclose(dy.copy_to_host(), 3 * x + y, rtol=1e-5, atol=1e-6)
    mod.close()


def test_echo_packs_every_scalar_type(dev, kernels):
    fn = kernels.function("echo16")
    layout = fn.param_layout()
    assert len(layout) == 16
    out = dev.alloc(96, "uint8")
    out.memset(0)
    values = [np.int8(-5), np.int16(-300), -70000, np.int64(-(2**40)), 1.25, np.float64(2.5), np.uint8(200),
              np.uint16(60000), np.uint32(4_000_000_000), np.uint64(2**63 + 5), np.float32(-0.5), -1e300,
              np.int32(123), 3.5, 2**40]
    fn.launch(1, 1, out, *values)
    got = out.copy_to_host()
    codes = ["b", "h", "i", "q", "f", "d", "B", "H", "I", "Q", "f", "d", "i", "f", "q"]
    for (offset, size), code, value in zip(layout[1:], codes, values):
        expected = struct.pack("<" + code, value)
        assert got[offset:offset + size].tobytes() == expected, (offset, code, value)
    out.close()


def test_echo_alternating_signatures_and_rare_types(dev, kernels):
    """Two argument-type signatures used in turn (each keeps its own prepared packing), fresh values every
    launch, and the rare types (bool_, float16, complex64) that take the struct packer."""
    fn = kernels.function("echo16")
    layout = fn.param_layout()
    out = dev.alloc(96, "uint8")
    rng = np.random.default_rng(16)
    codes_a = ["b", "h", "i", "q", "f", "d", "B", "H", "I", "Q", "f", "d", "i", "f", "q"]
    codes_b = ["?", "e", "i", "ff", "f", "d", "B", "H", "I", "Q", "f", "d", "i", "f", "q"]
    for round_ in range(6):
        ints = [int(v) for v in rng.integers(-100, 100, 4)]
        if round_ % 2 == 0:
            values = [np.int8(ints[0]), np.int16(ints[1]), ints[2], np.int64(ints[3]), float(ints[0]) / 4,
                      np.float64(rng.standard_normal()), np.uint8(round_), np.uint16(round_ * 7), np.uint32(round_),
                      np.uint64(2**64 - 1 - round_), np.float32(ints[1]), rng.standard_normal(), np.int32(ints[2]),
                      0.5 * round_, ints[3] * 2**33]
            codes = codes_a
        else:
            values = [np.bool_(round_ % 4 == 1), np.float16(ints[0] / 8), ints[1],
                      np.complex64(complex(ints[2], ints[3])), 1.5, np.float64(ints[0]), np.uint8(1), np.uint16(2),
                      np.uint32(3), np.uint64(4), np.float32(5), 6.0, np.int32(7), 8.0, 9]
            codes = codes_b
        out.memset(0)
        fn.launch(1, 1, out, *values)
        got = out.copy_to_host()
        for (offset, size), code, value in zip(layout[1:], codes, values):
            packed = struct.pack("<ff", value.real, value.imag) if code == "ff" else struct.pack("<" + code, value)
            assert len(packed) == size and got[offset:offset + size].tobytes() == packed, (round_, offset, code)
    out.close()


def test_raw_pointer_argument(dev, kernels):
    n = 256
    x, y, dx, dy = saxpy_buffers(dev, n)
    kernels.function("saxpy").launch(1, 256, 2.0, dx.ptr, dy.ptr, n)
    np.testing.assert_allclose(dy.copy_to_host(), 2 * x + y, rtol=1e-5, atol=1e-6)
    dx.close()
    dy.close()


def test_launch_on_streams_and_views(dev, kernels):
    s = dev.create_stream()
    n = 4096
    x, y, dx, dy = saxpy_buffers(dev, n)
    half = n // 2
    kernels.function("saxpy").launch(half // 256, 256, 2.0, dx[:half], dy[:half], half, stream=s)
    s.synchronize()
    expected = y.copy()
    expected[:half] += 2 * x[:half]
    np.testing.assert_allclose(dy.copy_to_host(), expected, rtol=1e-5, atol=1e-6)
    for b in (dx, dy):
        b.close()
    s.close()


def test_concurrent_launches_from_threads(dev, kernels):
    fn = kernels.function("scale_offset")
    n = 1 << 14
    errors = []

    def work(k):
        try:
            s = dev.create_stream()
            x = np.full(n, k, np.float32)
            dx, dy = dev.alloc(n, "float32", stream=s), dev.alloc(n, "float32", stream=s)
            dx.copy_from(x, stream=s)
            for _ in range(20):
                fn.launch(n // 256, 256, dx, dy, float(k), 1.0, n, stream=s)
            out = dy.copy_to_host(stream=s)
            s.synchronize()
            np.testing.assert_array_equal(out, np.full(n, k * k + 1, np.float32))
            dx.close()
            dy.close()
            s.close()
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_bad_launches(dev, kernels):
    fn = kernels.function("saxpy")
    n = 256
    _, _, dx, dy = saxpy_buffers(dev, n)
    limit = dev.attributes.max_threads_per_block
    cases = [
        lambda: fn.launch(1, 256, 2.0, dx, dy),  # too few
        lambda: fn.launch(1, 256, 2.0, dx, dy, n, n),  # too many
        lambda: fn.launch(1, 256, "2.0", dx, dy, n),  # wrong type
        lambda: fn.launch(1, 256, np.float64(2.0), dx, dy, n),  # 8-byte scalar for a 4-byte parameter
        lambda: fn.launch(1, 256, dx, dx, dy, n),  # pointer for a float
        lambda: fn.launch(1, 256, 2.0, dx, dy, 2**40),  # does not fit an unsigned int
        lambda: fn.launch(1, limit * 2, 2.0, dx, dy, n),  # block over the device limit
        lambda: fn.launch(0, 256, 2.0, dx, dy, n),  # zero grid
        lambda: fn.launch((1, 0, 1), 256, 2.0, dx, dy, n),
        lambda: fn.launch(-1, 256, 2.0, dx, dy, n),
        lambda: fn.launch((1, 1, 1, 1), 256, 2.0, dx, dy, n),
        lambda: fn.launch("1", 256, 2.0, dx, dy, n),
        lambda: fn.launch(1, 256, 2.0, dx, dy, n, stream="s"),
        lambda: fn.launch(1, 256, 2.0, dx, dy, n, shared_mem=-1),
    ]
    for i, call in enumerate(cases):
        with pytest.raises(InvalidArgument) as info:
            call()
        assert info.value.op == "cuLaunchKernel", (i, info.value)
    fn.launch(1, 256, 2.0, dx, dy, n)  # still fine afterwards
    dev.synchronize()
    # The int that does not fit is named, not the first int (here the pointers are given as addresses).
    for _ in range(2):  # the first launch of these types prepares a packer, the second reuses it
        with pytest.raises(InvalidArgument, match=r"argument 3 = 1099511627776 does not fit"):
            fn.launch(1, 256, 2.0, dx.ptr, dy.ptr, 2**40)
    dy.close()
    with pytest.raises(ClosedError):
        fn.launch(1, 256, 2.0, dx, dy, n)
    s = dev.create_stream()
    s.close()
    with pytest.raises(ClosedError):
        fn.launch(1, 256, 2.0, dx, dx, n, stream=s)
    dx.close()


def test_closed_module(dev, kernel_code):
    mod = dev.load_module(kernel_code)
    fn = mod.function("saxpy")
    buf = dev.alloc(16, "float32")
    mod.close()
    mod.close()
    with pytest.raises(ClosedError):
        fn.launch(1, 16, 1.0, buf, buf, 16)
    with pytest.raises(ClosedError):
        mod.function("saxpy")
    with pytest.raises(ClosedError):
        fn.attributes  # noqa: B018
    buf.close()


def test_compute_pipeline_from_ptx_text(dev):
    """ComputeDevice code may be PTX text as well as CUDA C++."""
    ptx = cu.Program(SOURCE).compile("ptx").code.rstrip(b"\0").decode()
    try:
        pipe = dev.pipeline(ptx, "scale_offset", buffers=2, params=3, workgroup_size=(64, 1, 1))
    except DriverError as exc:  # PTX newer than the driver: the documented limitation
        assert exc.code_name in ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "CUDA_ERROR_INVALID_PTX")
        return
    x = np.arange(100, dtype=np.float32)
    xs, ys = dev.upload(x), dev.alloc(100, "float32")
    dev.dispatch(pipe, [xs, ys], 2, (np.float32(3), np.float32(-1), np.uint32(100))).wait()
    np.testing.assert_array_equal(dev.download(ys), 3 * x - 1)
    with pytest.raises(InvalidArgument):
        dev.pipeline(ptx, "scale_offset", buffers=1, params=3)  # the kernel takes 5 parameters
    for b in (xs, ys, pipe):
        b.close()


@pytest.mark.skipif(FAKE, reason="the fake driver runs only its built-in kernels")
def test_a_float_for_an_integer_parameter_is_refused(dev):
    """Sizes alone cannot tell `unsigned n` from `float a`; the PTX types NVRTC records can."""
    src = r'''extern "C" __global__ void fill(unsigned* out, unsigned n, float v) {
        unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = (unsigned)v; }'''
    code = cu.Program(src).compile("cubin", arch=dev)
    fn = dev.load_module(code).function("fill")
    out = dev.alloc(8, "uint32")
    with pytest.raises(InvalidArgument, match="argument 1 is a float"):
        fn.launch(1, 8, out, 8.0, 3.0)
    with pytest.raises(InvalidArgument, match="argument 1 is a float"):
        fn.prepare(1, 8, out, 8.0, 3.0)
    fn.launch(1, 8, out, 8, 3)  # a Python int for the float parameter is converted to it
    assert (out.copy_to_host() == 3).all()
    g = cu.Graph(dev)  # a graph's kernel node packs its arguments by the same rule
    with pytest.raises(InvalidArgument, match="argument 1 is a float"):
        g.add_kernel(fn, 1, 8, out, 8.0, 3.0)
    g.add_kernel(fn, 1, 8, out, 8, 5)
    exe = g.instantiate()
    exe.launch()
    dev.default_stream.synchronize()
    assert (out.copy_to_host() == 5).all()
    exe.close()
    g.close()
    ptx = cu.Program(src).compile("ptx", arch=dev)
    fn2 = dev.load_module(ptx.code).function("fill")  # PTX text carries the types too
    with pytest.raises(InvalidArgument, match="argument 1 is a float"):
        fn2.launch(1, 8, out, 8.0, 3.0)
    out.close()


def _thread_capture_mode() -> int:
    from ironaccel_cuda._driver import call, driver

    mode = call("cuThreadExchangeStreamCaptureMode", driver().CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL)
    call("cuThreadExchangeStreamCaptureMode", mode)
    return int(mode)


def test_getting_a_kernel_during_a_global_capture_keeps_the_capture(dev, kernel_code):
    """function() waits on a private stream's event (module.settle_lazy_load).  During a global-mode capture on
    this thread that wait would be refused and would invalidate the capture, unless this thread's mode is relaxed
    around it and put back after."""
    mod = dev.load_module(kernel_code)
    _capture_saxpy(dev, "global", lambda: mod.function("saxpy"))
    mod.close()


def _capture_saxpy(dev, mode, during):
    """Capture y = 0; y = 2x + y on a new stream in `mode`, with `during()` (which returns the saxpy Function)
    called between the two; this thread's capture mode must be as before, and the graph must compute y = 2x."""
    s = dev.create_stream()
    n = 256
    x = np.arange(n, dtype=np.float32)
    dx, dy = dev.alloc(n, "float32"), dev.alloc(n, "float32")
    dx.copy_from(x)
    before = _thread_capture_mode()
    s.begin_capture(mode)
    dy.memset(0, stream=s)
    fn = during()
    fn.launch(1, n, 2.0, dx, dy, n, stream=s)
    assert _thread_capture_mode() == before
    graph = s.end_capture()
    exe = graph.instantiate()
    exe.launch(s)
    s.synchronize()
    np.testing.assert_allclose(dy.copy_to_host(), 2 * x)
    for obj in (exe, graph, dx, dy, s):
        obj.close()


@pytest.mark.parametrize("mode", ["global", "thread_local"])
def test_closing_a_stream_during_a_capture_keeps_the_capture(dev, kernel_code, mode):
    """Stream.close waits for the stream's work first (a query, or a wait).  While this thread captures another
    stream in global or thread-local mode, that call would invalidate the capture, unless this thread's mode is
    relaxed around it and put back after (cuda.core's graph/test_options.py collects a builder so)."""
    mod = dev.load_module(kernel_code)
    fn = mod.function("saxpy")
    n = 256
    a, b = dev.alloc(n, "float32"), dev.alloc(n, "float32")
    other = dev.create_stream()
    fn.launch(1, n, 1.0, a, b, n, stream=other)  # work for other's close to wait for

    def close_other():
        other.close()
        return fn

    _capture_saxpy(dev, mode, close_other)
    for obj in (a, b, mod):
        obj.close()


def test_each_kernel_got_is_settled_once_on_the_primary_contexts_kept_stream(dev, kernel_code, monkeypatch):
    """Module.function waits once per new kernel on an event of a private stream; the primary context makes that
    stream and event once (module.settle_lazy_load), and a cached Function is not settled again."""
    from ironaccel_cuda import module as module_mod

    real = module_mod.driver()
    seen: list[str] = []

    class Recording:
        def __getattr__(self, name):
            attr = getattr(real, name)
            if not name.startswith("cu"):
                return attr

            def call(*args):
                seen.append(name)
                return attr(*args)
            return call

    mod = dev.load_module(kernel_code)
    mod.function("saxpy")  # the context's stream and event exist from here on (or from an earlier test)
    monkeypatch.setattr(module_mod, "driver", lambda: Recording())
    seen.clear()
    mod.function("scale_offset")
    assert seen.count("cuEventRecord") == 1 and seen.count("cuEventSynchronize") == 1, seen
    assert "cuStreamCreate" not in seen and "cuStreamDestroy" not in seen, seen
    assert seen.count("cuThreadExchangeStreamCaptureMode") == 2, seen
    seen.clear()
    mod.function("scale_offset")
    mod.function("saxpy")
    assert seen == []
    mod.close()


def test_settling_a_lazy_load_never_raises_and_keeps_the_current_context(dev):
    from ironaccel_cuda._driver import call, driver
    from ironaccel_cuda.module import settle_lazy_load

    dev.bind()
    before = int(call("cuCtxGetCurrent"))
    settle_lazy_load(driver().CUcontext(0))  # no context: the push fails, nothing else is tried
    settle_lazy_load(dev._state.ctx)
    assert int(call("cuCtxGetCurrent")) == before
