"""webgpu specifics: adapters and their descriptors, pipelines, bind groups, params, submissions, typed errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ironaccel.errors import ClosedError, CompileError, DriverError, InvalidArgument
from ironaccel.registry import registry
from ironaccel.testing.conformance import scale_offset
from ironaccel.types import ComputeTier, DeviceKind, Vendor

KERNELS = Path(__file__).with_name("kernels")
SCALE_OFFSET = (KERNELS / "scale_offset.wgsl").read_text()
MULTIPLY = (KERNELS / "multiply_in_place.wgsl").read_text()
F = np.float32

backend_marked = pytest.mark.backend("webgpu")


@pytest.fixture
def pipeline(device):
    return device.pipeline(SCALE_OFFSET, buffers=2, params=3)


@backend_marked
class TestAdapters:
    def test_descriptors_describe_every_adapter(self):
        devices = registry.devices("webgpu")
        for d in devices:
            extras = d.extras
            assert extras["backend_type"] in {"Vulkan", "Metal", "D3D12", "OpenGL", "OpenGLES", "BrowserWebGPU"}
            assert extras["adapter_type"] in {"DiscreteGPU", "IntegratedGPU", "CPU", "Unknown", "VirtualGPU"}
            assert d.name.endswith(f"via {extras['backend_type']}")
            assert extras["limits"]["max-compute-workgroups-per-dimension"] >= 65535
            assert extras["max_storage_buffer_binding_size"] >= 128 << 20
            if extras["adapter_type"] == "CPU":
                assert d.kind is DeviceKind.CPU and d.compute_tier is ComputeTier.SOFTWARE
            else:
                assert d.kind is DeviceKind.GPU and d.compute_tier > ComputeTier.SOFTWARE
            if extras["vendor_id"] == 0x10005 or "llvmpipe" in extras["device"]:
                assert d.vendor is Vendor.MESA
            if extras["vendor_id"] == 0x10DE:
                assert d.vendor is Vendor.NVIDIA

    def test_order_is_stable_and_native_apis_come_first(self):
        from ironaccel_webgpu.backend import Backend

        first, second = Backend().devices(), Backend().devices()
        assert [d.name for d in first] == [d.name for d in second]
        ranks = [0 if d.extras["backend_type"] in {"Vulkan", "Metal", "D3D12"} else 1 for d in first]
        assert ranks == sorted(ranks)

    def test_generic_routine_on_every_adapter(self):
        """Every adapter runs the routine, or refuses its device with a typed error naming the call.

        Seen on the H200: wgpu-native's OpenGL adapter on NVIDIA's driver picks a GL
        version without compute and fails wgpuAdapterRequestDevice.  The native
        adapter must always work, and on Mesa (CI) every adapter must.
        """
        rng = np.random.default_rng(5)
        devices = registry.devices("webgpu")
        ran, refused = [], []
        for d in devices:
            try:
                dev = registry.open("webgpu", d.ordinal)
            except DriverError as exc:
                assert exc.op == "wgpuAdapterRequestDevice", exc
                refused.append(d.extras["backend_type"])
                continue
            with dev:
                x = rng.standard_normal(10_000).astype(F)
                y = scale_offset(dev, x, 1.5, -2.0, dev.pipeline(SCALE_OFFSET, buffers=2, params=3))
                np.testing.assert_allclose(y, F(1.5) * x + F(-2.0), rtol=1e-5, atol=1e-6, err_msg=d.name)
            ran.append(d.extras["backend_type"])
        assert {"Vulkan", "Metal", "D3D12"} & set(ran), (ran, refused)
        if all(d.vendor is Vendor.MESA for d in devices):
            assert not refused, refused


@backend_marked
class TestCompute:
    def test_three_buffers_2d_groups_default_read_access(self, device):
        rng = np.random.default_rng(1)
        n = 16 * 64 * 3
        x = rng.integers(-1000, 1000, n, dtype=np.int32)
        y = rng.integers(-1000, 1000, n, dtype=np.int32)
        bx, by = device.upload(x), device.upload(y)
        bz = device.upload(np.full(n, 123456, np.int32))  # poisoned
        p = device.pipeline(MULTIPLY, buffers=3, workgroup_size=(8, 8, 1))
        device.dispatch(p, [bx, by, bz], (16 * 64 // 64, 3)).wait()
        np.testing.assert_array_equal(device.download(bz), x * y)
        np.testing.assert_array_equal(device.download(bx), np.full(n, -1, np.int32))
        np.testing.assert_array_equal(device.download(by), y)

    def test_back_to_back_dispatches_see_their_own_params(self, device, pipeline):
        x = np.arange(4096, dtype=F)
        bx = device.upload(x)
        outs = [device.alloc(x.size) for _ in range(4)]
        for k, out in enumerate(outs):  # no waits: each params write is ordered on the queue
            device.dispatch(pipeline, [bx, out], x.size // 64, (F(k), F(-k), np.uint32(x.size)))
        for k, out in enumerate(outs):
            np.testing.assert_array_equal(device.download(out), F(k) * x - F(k))

    def test_python_scalars_pack_as_32_bit(self, device, pipeline):
        x = np.linspace(-1, 1, 640, dtype=F)
        bx, by = device.upload(x), device.alloc(x.size)
        device.dispatch(pipeline, [bx, by], 10, (2.5, 0.25, 640))
        np.testing.assert_allclose(device.download(by), F(2.5) * x + F(0.25), rtol=1e-5, atol=1e-6)  # GPUs fuse to FMA
        for bad in [(np.float64(1), F(0), np.uint32(1)), (F(1), F(0), "3"), (F(1), F(0), 2**33), (1e300, F(0), 1)]:
            with pytest.raises(InvalidArgument) as info:
                device.dispatch(pipeline, [bx, by], 10, bad)
            assert info.value.op == "dispatch"

    def test_pipelines_and_bind_groups_are_cached(self, device):
        from ironaccel.compute.handles import SPARE_MAX_BYTES

        p1 = device.pipeline(SCALE_OFFSET, buffers=2, params=3)
        p2 = device.pipeline(SCALE_OFFSET, buffers=2, params=3)
        assert p1 is not p2 and p1.program is p2.program
        program = p1.program
        bx, by = device.upload(np.ones(64, F)), device.alloc(64)
        params = (F(2), F(1), np.uint32(64))
        for _ in range(3):
            device.dispatch(p1, [bx, by], 1, params)
        device.dispatch(p2, [bx, by], 1, params)
        assert len(program.bind_groups) == 1
        np.testing.assert_array_equal(device.download(by), np.full(64, 3, F))
        p1.close()
        p1.close()
        with pytest.raises(ClosedError):
            device.dispatch(p1, [bx, by], 1, params)
        assert device.pipeline(SCALE_OFFSET, buffers=2, params=3).program is program  # still cached
        by.close()  # kept for the next buffer of its size, with its bind groups
        assert len(program.bind_groups) == 1
        again = device.alloc(64)  # that buffer: its bind group serves again
        device.dispatch(p2, [bx, again], 1, params)
        assert len(program.bind_groups) == 1
        big = device.alloc(SPARE_MAX_BYTES // 4 + 1)
        device.dispatch(p2, [bx, big], 1, params)
        assert len(program.bind_groups) == 2
        big.close()  # too big to keep: freed, and the bind groups that use it dropped
        assert len(program.bind_groups) == 1

    def test_closed_small_buffers_are_reused_without_wgpu_calls(self, device, pipeline, monkeypatch):
        from ironaccel.compute.handles import SPARE_MAX_BYTES

        x = np.arange(256, dtype=F)

        def round_trip() -> np.ndarray:
            bx, by = device.upload(x), device.alloc(x.size)
            device.dispatch(pipeline, [bx, by], 4, (2.0, 1.0, 256))
            y = device.download(by)
            bx.close()
            by.close()
            return y

        round_trip()
        calls: list[str] = []
        gpu = device.gpu
        for name in ("create_buffer", "create_buffer_with_data", "create_bind_group"):
            original = getattr(gpu, name)
            monkeypatch.setattr(gpu, name, lambda *a, _f=original, _n=name, **k: calls.append(_n) or _f(*a, **k))
        monkeypatch.setattr(device, "_poll", lambda: calls.append("_poll"))
        for _ in range(3):
            np.testing.assert_array_equal(round_trip(), 2 * x + 1)
        assert calls == []  # x written into the buffer the last one closed; no buffer, bind group or poll
        big = device.alloc(SPARE_MAX_BYTES // 4 + 1)
        big.close()
        assert calls == ["create_buffer", "_poll"]  # over the size kept: made, then destroyed

    def test_sizes_are_padded_but_reported_exactly(self, device):
        data = np.arange(1001, dtype=np.uint8)
        buf = device.upload(data)
        assert (buf.nbytes, buf.size, buf.padded_nbytes) == (1001, 1001, 1004)
        np.testing.assert_array_equal(device.download(buf), data)
        head = np.zeros(7, np.uint8)
        np.testing.assert_array_equal(device.download(buf, head), data[:7])
        assert device.alloc(3, "float16").nbytes == 6

    def test_submission_done_and_wait(self, device, pipeline):
        x = np.ones(1 << 18, F)
        bx, by = device.upload(x), device.alloc(x.size)
        sub = device.dispatch(pipeline, [bx, by], x.size // 64, (F(3), F(0), np.uint32(x.size)))
        sub.wait(timeout=60)
        assert sub.done()
        later = device.dispatch(pipeline, [by, bx], x.size // 64, (F(1), F(1), np.uint32(x.size)))
        while not later.done():
            pass
        np.testing.assert_array_equal(device.download(bx), np.full(x.size, 4, F))
        device.close()
        later.wait()  # waiting after close returns: close finished the work

    def test_wait_from_another_thread(self, device, pipeline):
        import threading

        x = np.ones(1 << 16, F)
        bx, by = device.upload(x), device.alloc(x.size)
        sub = device.dispatch(pipeline, [bx, by], x.size // 64, (F(5), F(0), np.uint32(x.size)))
        waited = []
        worker = threading.Thread(target=lambda: waited.append(sub.wait(timeout=60) or sub.done()))
        worker.start()
        worker.join()
        assert waited == [True]
        np.testing.assert_array_equal(device.download(by), np.full(x.size, 5, F))


READ_TWICE = """
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&out)) { out[id.x] = a[id.x] * b[id.x]; }
}
"""


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@backend_marked
class TestBadInput:
    def test_one_buffer_in_two_read_only_bindings(self, device):
        p = device.pipeline(READ_TWICE, buffers=3)
        x = device.upload(np.arange(128, dtype=F))
        out = device.alloc(128)
        device.dispatch(p, [x, x, out], 2).wait()  # WebGPU allows read-only aliasing; so does the kit's rule
        np.testing.assert_array_equal(device.download(out), np.arange(128, dtype=F) ** 2)
        with pytest.raises(InvalidArgument) as info:  # once it is also the output: refused before wgpu sees it
            device.dispatch(p, [x, out, out], 2)
        assert "same buffer" in str(info.value) and info.value.op == "dispatch"

    @pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmRSS from /proc")
    def test_closed_buffers_give_their_memory_back_without_a_submission(self, device):
        block = np.ones(1 << 20, F)  # 4 MiB
        device.download(device.upload(block))  # warm up: staging, allocator pools
        before = rss_bytes()
        for _ in range(300):
            device.upload(block).close()
        grown = rss_bytes() - before
        assert grown < 256 << 20, f"300 closed 4 MiB uploads grew the process by {grown >> 20} MiB"

    def test_partial_writes_of_any_length(self, device):
        data = np.arange(11, dtype=np.uint8)
        buf = device.upload(np.full(11, 200, np.uint8))
        device.write(buf, data[:6])  # not a whole number of words: the rest of the last word is kept
        np.testing.assert_array_equal(device.download(buf), np.r_[data[:6], np.full(5, 200, np.uint8)])
        device.write(buf, data)
        np.testing.assert_array_equal(device.download(buf), data)


@backend_marked
class TestErrors:
    def test_compile_error_names_the_op_and_carries_naga_log(self, device):
        with pytest.raises(CompileError) as info:
            device.pipeline((KERNELS / "broken.wgsl").read_text(), buffers=2, params=3)
        assert info.value.op == "wgpuDeviceCreateShaderModule"
        assert "f32" in info.value.log
        with pytest.raises(CompileError) as info:
            device.pipeline(SCALE_OFFSET, "no_such_entry", buffers=2, params=3)
        assert "no_such_entry" in info.value.log

    def test_bindings_that_do_not_match_the_shader(self, device):
        with pytest.raises(InvalidArgument) as info:  # the shader's uniform sits at binding 2, nothing declared
            device.pipeline(SCALE_OFFSET, buffers=2, params=0)
        assert "binding" in str(info.value)
        with pytest.raises(InvalidArgument):  # binding 2 would be a storage buffer, the shader says uniform
            device.pipeline(SCALE_OFFSET, buffers=3, params=3)

    def test_bad_inputs(self, device, pipeline):
        bx, by = device.alloc(64), device.alloc(64)
        params = (F(1), F(0), np.uint32(64))
        cases = [
            lambda: device.dispatch(pipeline, [bx, "not a buffer"], 1, params),
            lambda: device.dispatch("not a pipeline", [bx, by], 1, params),
            lambda: device.dispatch(pipeline, [bx, by], (1, 2, 3, 4), params),
            lambda: device.dispatch(pipeline, [bx, by], (65536,), params),
            lambda: device.dispatch(pipeline, [bx, by], 2.0, params),
            lambda: device.download(bx, [0.0] * 4),
            lambda: device.download(bx, np.zeros(4, F)[::2]),
            lambda: device.upload(np.zeros(4, object)),
            lambda: device.alloc(4, "complex256"),
            lambda: device.pipeline(12345, buffers=2, params=3),
            lambda: device.pipeline(SCALE_OFFSET, buffers=-1),
        ]
        for case in cases:
            with pytest.raises(InvalidArgument) as info:
                case()
            assert info.value.op and info.value.backend == "webgpu"

    def test_binding_larger_than_the_device_allows(self, device, pipeline):
        bx, by = device.alloc(1024), device.alloc(1024)
        device.max_binding_bytes = 2048  # as if the device's max-storage-buffer-binding-size were 2 KiB
        with pytest.raises(InvalidArgument) as info:
            device.dispatch(pipeline, [bx, by], 1, (F(1), F(0), np.uint32(1)))
        assert "max-storage-buffer-binding-size" in str(info.value)

    def test_objects_of_another_device_and_after_close(self, device, pipeline):
        with registry.open("webgpu", 0) as other:
            foreign = other.pipeline(SCALE_OFFSET, buffers=2, params=3)
            a, b = device.alloc(64), device.alloc(64)
            with pytest.raises(InvalidArgument):
                device.dispatch(foreign, [a, b], 1, (F(1), F(0), np.uint32(64)))
        buf = device.alloc(64)
        device.close()
        device.close()
        assert buf.closed  # closing the device freed its buffers
        for call in (lambda: device.dispatch(pipeline, [a, b], 1, ()), lambda: device.download(a),
                     lambda: device.pipeline(SCALE_OFFSET, buffers=2, params=3), device.synchronize):
            with pytest.raises(ClosedError):
                call()
        buf.close()


def test_importing_the_package_imports_no_wgpu():
    code = "import sys, ironaccel_webgpu, ironaccel_webgpu.plugin; assert 'wgpu' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_probe_without_the_binding_says_what_to_install():
    code = textwrap.dedent("""
        import sys
        sys.modules["wgpu"] = None  # import wgpu raises ImportError
        from ironaccel_webgpu.backend import Backend
        result = Backend().probe()
        assert not result.available
        assert "wgpu" in result.reason and result.fix == "pip install wgpu", result
    """)
    subprocess.run([sys.executable, "-c", code], check=True)


def test_first_survey_prints_no_unexplained_warning():
    """A fresh machine's survey (no XDG_RUNTIME_DIR, as in containers and CI) prints nothing to stderr: wgpu-native's
    EGL probe used to make libwayland print "XDG_RUNTIME_DIR is invalid or not set" four times."""
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["IRONACCEL_BACKENDS"] = "vulkan,webgpu,opengl"
    done = subprocess.run([sys.executable, "-m", "ironaccel"], env=env, capture_output=True, text=True, timeout=120)
    assert "webgpu" in done.stdout
    assert "XDG_RUNTIME_DIR" not in done.stderr, done.stderr
    assert not done.stderr.strip(), done.stderr
