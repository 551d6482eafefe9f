"""HipDevice against the fake libamdhip64: streams, events, memory, modules, launch, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from ironaccel.errors import ClosedError, CompileError, DriverError, InvalidArgument
from ironaccel_rocm import Program
from ironaccel_rocm.backend import Backend

SOURCE = r"""
extern "C" __global__ void scale_offset(const float* x, float* y, float a, float b, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __device__ float scale;
__device__ float scale = 2.0f;
"""


@pytest.fixture(scope="module")
def code() -> bytes:
    return bytes(Program(SOURCE).compile(arch="gfx90a"))


@pytest.fixture
def backend() -> Backend:
    return Backend()


@pytest.fixture
def dev(backend: Backend):
    with backend.open(0) as d:
        yield d


def test_probe_and_devices(backend: Backend) -> None:
    result = backend.probe()
    assert result.available and result.device_count == 2
    names = [d.name for d in backend.devices()]
    assert names == ["Fake AMD GPU 0", "Fake AMD GPU 1"]
    assert backend.devices()[0].memory_bytes == 1 << 30


def test_memory_round_trip_sync_and_stream_ordered(dev) -> None:
    x = np.arange(100, dtype=np.float32)
    with dev.alloc(x.nbytes) as a, dev.stream(priority=-1) as s, dev.alloc(x.nbytes, stream=s) as b:
        a.copy_from(x)
        a.copy_to_device(b, stream=s)
        out = np.zeros_like(x)
        b.copy_to(out, stream=s)
        s.synchronize()
        np.testing.assert_array_equal(out, x)
        b.memset(0xFF)
        b.copy_to(out)
        assert out.view(np.uint32)[0] == 0xFFFFFFFF
        assert s.priority == -1 and s.query()


def test_pinned_copies(dev) -> None:
    with dev.pinned(64) as host, dev.alloc(64) as mem:
        host.array[:] = np.arange(64, dtype=np.uint8)
        mem.copy_from(host)
        back = np.zeros(64, np.uint8)
        mem.copy_to(back)
        np.testing.assert_array_equal(back, np.arange(64, dtype=np.uint8))


def test_events_time_and_order(dev) -> None:
    with dev.stream() as s, dev.event() as start, dev.event() as end:
        start.record(s)
        end.record(s)
        end.synchronize()
        assert end.query() and start.elapsed_ms(end) >= 0.0
        s.wait(end)


def test_saxpy_through_a_real_code_object(dev, code: bytes) -> None:
    n = 1000
    rng = np.random.default_rng(1)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    with dev.load_module(code) as module, dev.alloc(x.nbytes) as dx, dev.alloc(y.nbytes) as dy:
        dx.copy_from(x)
        dy.copy_from(y)
        module.function("saxpy").launch((n + 63) // 64, 64, dx, dy, 3.0, n)
        out = np.empty_like(y)
        dy.copy_to(out)
        np.testing.assert_allclose(out, np.float32(3.0) * x + y, rtol=1e-6)
        ptr, size = module.global_("scale")
        assert ptr and size == 4
        from hip import hip

        value = np.zeros(1, np.float32)
        assert hip.hipMemcpyDtoH(value.ctypes.data, ptr, 4)[0] == 0
        assert value[0] == 2.0  # the initial value the code object holds


def test_wrong_kernel_arguments(dev, code: bytes) -> None:
    with dev.load_module(code) as module, dev.alloc(64) as mem:
        fn = module.function("scale_offset")
        for args in ((mem,), (mem, mem, 1.0, 2.0, 3, 4), (mem, 1.0, 1.0, 2.0, 3), (mem, mem, np.float64(1), 2.0, 3),
                     (mem, mem, 1.0, 2.0, 2**40), (mem, mem, "a", 2.0, 3)):
            with pytest.raises(InvalidArgument, match="hipModuleLaunchKernel"):
                fn.launch(1, 64, *args)
        for grid in (0, (1, 1, 1, 1), -1, "1"):
            with pytest.raises(InvalidArgument, match="hipModuleLaunchKernel"):
                fn.launch(grid, 64, mem, mem, 1.0, 2.0, 3)
        with pytest.raises(InvalidArgument, match="hipModuleLaunchKernel"):  # the fake's limit: 1024 threads
            fn.launch(1, 2048, mem, mem, 1.0, 2.0, 3)
        with pytest.raises(InvalidArgument, match="hipModuleGetFunction"):
            module.function("nope")
        with pytest.raises(InvalidArgument, match="hipModuleGetGlobal"):
            module.global_("nope")


def test_bad_sizes_and_modules(dev) -> None:
    for bad in (0, -1, 1.5, "8", 1 << 40):
        with pytest.raises((InvalidArgument, DriverError)) as info:
            dev.alloc(bad)
        assert "hipMalloc" in str(info.value)
    with dev.alloc(16) as mem:
        with pytest.raises(InvalidArgument, match="hipMemcpyHtoD"):
            mem.copy_from(np.zeros(32, np.uint8))
        with pytest.raises(InvalidArgument, match="hipMemcpyDtoH"):
            mem.copy_to(np.zeros(8, np.uint8), offset=12)
        with pytest.raises(InvalidArgument, match="hipMemsetD8"):
            mem.memset(256)
    for image in (b"", b"\x7fELF" + b"\0" * 60, "text", None):
        with pytest.raises(InvalidArgument, match="hipModuleLoadData"):
            dev.load_module(image)
    with pytest.raises(CompileError):
        Program("extern \"C\" __global__ void k() { nope; }").compile(arch="gfx90a")


def test_closed_objects_and_another_device(backend: Backend, code: bytes) -> None:
    with backend.open(0) as a, backend.open(1) as b:
        s_b, mem_b, ev_b = b.stream(), b.alloc(16), b.event()
        mem_a = a.alloc(16)
        module = a.load_module(code)
        fn = module.function("scale_offset")
        with pytest.raises(InvalidArgument, match="another device"):
            fn.launch(1, 64, mem_b, mem_a, 1.0, 2.0, 4)
        with pytest.raises(InvalidArgument, match="another device"):
            fn.launch(1, 64, mem_a, mem_a, 1.0, 2.0, 4, stream=s_b)
        with pytest.raises(InvalidArgument, match="another device"):
            mem_a.copy_to_device(mem_b)
        with pytest.raises(InvalidArgument, match="another device"):
            a.event().record(s_b)
        with pytest.raises(InvalidArgument, match="another device"):
            a.event().elapsed_ms(ev_b)
        mem_a.close()
        mem_a.close()
        with pytest.raises(ClosedError):
            fn.launch(1, 64, mem_a, mem_a, 1.0, 2.0, 4)
        with pytest.raises(ClosedError):
            mem_a.copy_from(np.zeros(4, np.float32))
        s_b.close()
        with pytest.raises(ClosedError):
            s_b.synchronize()
        module.close()
        with pytest.raises(ClosedError):
            module.function("scale_offset")
        ev_b.close()
        mem_b.close()
    with pytest.raises(ClosedError):
        a.alloc(16)


def _live() -> int:
    import ctypes
    import os

    return int(ctypes.CDLL(os.path.join(os.environ["ROCM_PATH"], "lib", "libamdhip64.so")).fakehip_live())


def test_close_frees_everything_the_device_made(backend: Backend, code: bytes) -> None:
    before = _live()
    dev = backend.open(0)
    s = dev.stream()
    dev.alloc(64, stream=s)
    dev.alloc(64)
    dev.pinned(64)
    dev.event().record(s)
    dev.load_module(code).function("saxpy")
    assert _live() > before
    dev.close()
    assert _live() == before
    dev.close()


def test_compute_device_leaves_nothing(code: bytes) -> None:
    before = _live()
    with Backend().compute(0) as dev:
        x = dev.upload(np.ones(64, np.float32))
        y = dev.alloc(64, "float32", memory="host")
        pipe = dev.pipeline(SOURCE, "scale_offset", buffers=2, params=3)
        q = dev.create_queue()
        q.dispatch(pipe, [x, y], 1, (np.float32(1), np.float32(0), np.uint32(64)))
        f = dev.create_fence()
        q.signal(f, 1)
        batch = dev.batch(timestamps=True)
        batch.dispatch(pipe, [x, y], 1, (np.float32(1), np.float32(0), np.uint32(64)))
        dev.submit(batch)
    assert _live() == before
