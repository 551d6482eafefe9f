"""opengl specifics: the descriptor, the shader interface check, contexts and threads, fences, typed errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ironaccel.errors import ClosedError, CompileError, InvalidArgument, InvalidState
from ironaccel.registry import registry
from ironaccel.testing.conformance import scale_offset
from ironaccel.types import ComputeTier, DeviceKind, Vendor

KERNELS = Path(__file__).with_name("kernels")
SCALE_OFFSET = (KERNELS / "scale_offset.comp").read_text()
MULTIPLY = (KERNELS / "multiply_in_place.comp").read_text()
F = np.float32
HEADER = "#version 430\nlayout(local_size_x = 64) in;\n"

backend_marked = pytest.mark.backend("opengl")


@pytest.fixture
def pipeline(device):
    return device.pipeline(SCALE_OFFSET, buffers=2, params=3)


@backend_marked
class TestDescriptor:
    def test_names_the_renderer_and_its_compute_limits(self):
        (d,) = registry.devices("opengl")
        extras = d.extras
        assert d.name == extras["gl_renderer"] and extras["gl_version"]
        assert extras["version_code"] >= 430
        assert len(extras["max_compute_work_group_count"]) == 3
        assert min(extras["max_compute_work_group_count"]) >= 65535
        assert extras["max_compute_work_group_invocations"] >= 1024
        assert extras["max_shader_storage_block_size"] >= 1 << 24
        if "llvmpipe" in d.name:
            assert (d.kind, d.compute_tier, d.vendor) == (DeviceKind.CPU, ComputeTier.SOFTWARE, Vendor.MESA)
        if "NVIDIA" in extras["gl_vendor"]:
            assert d.vendor is Vendor.NVIDIA and d.kind is DeviceKind.GPU
        if extras["memory_source"]:
            assert d.memory_bytes >= 1 << 28
        else:
            assert d.memory_bytes == 0

    def test_probe_reports_driver_and_binding(self):
        result = registry.probe("opengl")
        assert result.available and result.device_count == 1
        assert result.driver_version == registry.devices("opengl")[0].extras["gl_version"]
        assert result.binding_version


@backend_marked
class TestCompute:
    def test_three_buffers_2d_groups(self, device):
        rng = np.random.default_rng(2)
        n = 16 * 64 * 3
        x = rng.integers(-1000, 1000, n, dtype=np.int32)
        y = rng.integers(-1000, 1000, n, dtype=np.int32)
        bx, by, bz = device.upload(x), device.upload(y), device.upload(np.full(n, 123456, np.int32))
        p = device.pipeline(MULTIPLY, buffers=3, workgroup_size=(8, 8, 1))
        device.dispatch(p, [bx, by, bz], (16 * 64 // 64, 3)).wait()
        np.testing.assert_array_equal(device.download(bz), x * y)
        np.testing.assert_array_equal(device.download(bx), np.full(n, -1, np.int32))
        np.testing.assert_array_equal(device.download(by), y)

    def test_back_to_back_dispatches_see_their_own_params(self, device, pipeline):
        x = np.arange(4096, dtype=F)
        bx = device.upload(x)
        outs = [device.alloc(x.size) for _ in range(4)]
        for k, out in enumerate(outs):
            device.dispatch(pipeline, [bx, out], x.size // 64, (F(k), F(-k), np.uint32(x.size)))
        for k, out in enumerate(outs):
            np.testing.assert_array_equal(device.download(out), F(k) * x - F(k))

    def test_python_scalars_pack_as_32_bit(self, device, pipeline):
        x = np.linspace(-1, 1, 640, dtype=F)
        bx, by = device.upload(x), device.alloc(x.size)
        device.dispatch(pipeline, [bx, by], 10, (2.5, 0.25, 640))
        np.testing.assert_allclose(device.download(by), F(2.5) * x + F(0.25), rtol=1e-5, atol=1e-6)  # GPUs fuse to FMA
        for bad in [(np.float64(1), F(0), np.uint32(1)), (F(1), F(0), "3"), (F(1), F(0), 2**33)]:
            with pytest.raises(InvalidArgument):
                device.dispatch(pipeline, [bx, by], 10, bad)

    def test_an_int_param_past_int32_after_its_signature_was_cached(self, device, pipeline):
        x = np.linspace(-1, 1, 640, dtype=F)
        bx, by = device.upload(x), device.alloc(x.size)
        device.dispatch(pipeline, [bx, by], 10, (2.0, 0.0, 640))  # (float, float, int) cached with int32 for n
        device.dispatch(pipeline, [bx, by], 10, (1.0, 1.0, 2**31 + 5))  # past int32: packed as the uint32 it is
        np.testing.assert_array_equal(device.download(by), x + F(1))

    def test_closed_small_buffers_are_reused_without_gl_calls(self, device, pipeline, monkeypatch):
        import moderngl

        from ironaccel.compute.handles import SPARE_BUFFERS, SPARE_MAX_BYTES

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

        def counting(cls: Any, name: str) -> None:
            original = getattr(cls, name)

            def count(*args: Any, **kwargs: Any) -> Any:
                calls.append(name)
                return original(*args, **kwargs)

            monkeypatch.setattr(cls, name, count)

        counting(moderngl.Context, "buffer")
        for name in ("write", "release", "bind_to_storage_buffer"):
            counting(moderngl.Buffer, name)
        for _ in range(3):
            np.testing.assert_array_equal(round_trip(), 2 * x + 1)
        # Each round trip writes x into the buffer the last one closed; none is made, deleted or bound again.
        assert calls == ["write"] * 3
        calls.clear()
        big = device.alloc(SPARE_MAX_BYTES // 4 + 1)
        big.close()  # over the size kept: deleted
        small = [device.alloc(16) for _ in range(SPARE_BUFFERS)]  # 64 bytes: none of that size kept yet
        for buf in small:
            buf.close()  # the two of 1 KiB still kept, so room for SPARE_BUFFERS - 2 more
        assert calls == ["buffer", "release"] + ["buffer"] * SPARE_BUFFERS + ["release"] * 2

    def test_a_dispatch_checks_its_buffers_once_until_one_closes(self, device, pipeline, monkeypatch):
        bx, by = device.upload(np.ones(64, F)), device.alloc(64)
        checks = []
        bind = type(device)._bind
        monkeypatch.setattr(type(device), "_bind", lambda self, *args: checks.append(1) or bind(self, *args))
        for _ in range(3):
            device.dispatch(pipeline, [bx, by], 1, (2.0, 0.0, 64))
        assert len(checks) == 1  # the same buffers again: the checks they passed still hold
        other = device.alloc(64)
        other.close()  # any buffer of the device closing invalidates that
        device.dispatch(pipeline, (bx, by), 1, (2.0, 0.0, 64))
        assert len(checks) == 2
        by.close()
        with pytest.raises(ClosedError):
            device.dispatch(pipeline, [bx, by], 1, (2.0, 0.0, 64))
        ghost = device.alloc(64)
        device.dispatch(pipeline, [bx, ghost], 1, (2.0, 0.0, 64))
        del ghost  # collected unclosed: its id may be reused by the next buffer, which must be checked anew
        fresh = device.upload(np.zeros(64, np.int32))
        with pytest.raises(InvalidArgument, match="int32"):
            device.dispatch(pipeline, [bx, fresh], 1, (2.0, 0.0, 64))

    def test_pipelines_are_cached_and_closing_a_handle_keeps_the_program(self, device):
        p1 = device.pipeline(SCALE_OFFSET, buffers=2, params=3)
        p2 = device.pipeline(SCALE_OFFSET, buffers=2, params=3)
        assert p1 is not p2 and p1.program is p2.program
        program = p1.program
        p1.close()
        p1.close()
        bx, by = device.upload(np.ones(64, F)), device.alloc(64)
        with pytest.raises(ClosedError):
            device.dispatch(p1, [bx, by], 1, (F(2), F(1), np.uint32(64)))
        device.dispatch(p2, [bx, by], 1, (F(2), F(1), np.uint32(64)))
        np.testing.assert_array_equal(device.download(by), np.full(64, 3, F))
        assert device.pipeline(SCALE_OFFSET, buffers=2, params=3).program is program

    def test_freed_buffers_do_not_stay_bound(self, device, pipeline):
        x = np.arange(256, dtype=F)
        params = (F(1), F(1), np.uint32(256))
        for round_ in range(4):  # GL reuses buffer names: a stale binding would write the old buffer
            bx, by = device.upload(x + round_), device.upload(np.zeros(256, F))
            device.dispatch(pipeline, [bx, by], 4, params)
            np.testing.assert_array_equal(device.download(by), x + round_ + 1)
            bx.close()
            by.close()

    def test_two_devices_interleaved_on_one_thread(self, device, pipeline):
        with registry.open("opengl") as other:
            p_other = other.pipeline(SCALE_OFFSET, buffers=2, params=3)
            x = np.arange(1000, dtype=F)
            a_in, b_in = device.upload(x), other.upload(2 * x)
            a_out, b_out = device.alloc(1000), other.alloc(1000)
            device.dispatch(pipeline, [a_in, a_out], 16, (F(3), F(0), np.uint32(1000)))
            other.dispatch(p_other, [b_in, b_out], 16, (F(5), F(0), np.uint32(1000)))
            np.testing.assert_array_equal(device.download(a_out), 3 * x)
            np.testing.assert_array_equal(other.download(b_out), 10 * x)

    def test_submission_done_wait_and_the_glfinish_fallback(self, device, pipeline):
        x = np.ones(1 << 18, F)
        bx, by = device.upload(x), device.alloc(x.size)
        sub = device.dispatch(pipeline, [bx, by], (4096, 1), (F(3), F(0), np.uint32(x.size)))
        while not sub.done():
            pass
        sub.wait(timeout=60)
        device._calls.available = False  # as with a moderngl that does not expose glFenceSync
        later = device.dispatch(pipeline, [by, bx], (4096, 1), (F(1), F(1), np.uint32(x.size)))
        later.wait()
        assert later.done()
        np.testing.assert_array_equal(device.download(bx), np.full(x.size, 4, F))
        device.close()
        later.wait()

    def test_generic_routine_on_64_mib(self, device, pipeline):
        n = 16 << 20
        x = np.random.default_rng(3).standard_normal(n).astype(F)
        xs, ys = device.upload(x), device.alloc(n)
        device.dispatch(pipeline, [xs, ys], (4096, n // 64 // 4096), (F(0.5), F(2), np.uint32(n)))
        np.testing.assert_allclose(device.download(ys), F(0.5) * x + F(2), rtol=1e-5, atol=1e-6)
        y = scale_offset(device, x[:1000], -1.0, 0.0, pipeline)
        np.testing.assert_array_equal(y, -x[:1000])


@backend_marked
class TestErrors:
    def test_compile_and_link_errors_carry_the_log(self, device):
        with pytest.raises(CompileError) as info:
            device.pipeline((KERNELS / "broken.comp").read_text(), buffers=2)
        assert info.value.op == "glCompileShader" and "undeclared_name" in info.value.log
        with pytest.raises(CompileError) as info:  # no local size: compiles, fails to link
            device.pipeline("#version 430\nvoid main() {}\n", buffers=0)
        assert info.value.op == "glLinkProgram" and info.value.log

    @pytest.mark.parametrize("source,buffers,params,words", [
        (SCALE_OFFSET, 1, 3, "binding 1"),  # Y sits at binding 1, outside 0..0
        (SCALE_OFFSET, 2, 0, "takes no params"),
        (SCALE_OFFSET, 2, 5, "too small"),
        (HEADER + "uniform float a;\nlayout(std430, binding=0) buffer Y { float y[]; };\n"
         "void main() { y[0] = a; }\n", 1, 0, "plain uniforms a"),
        (HEADER + "layout(std140, binding=1) uniform P { float a; };\nlayout(std430, binding=0) buffer Y "
         "{ float y[]; };\nvoid main() { y[0] = a; }\n", 1, 1, "binding 1"),
    ])
    def test_interface_that_does_not_match(self, device, source, buffers, params, words):
        with pytest.raises(InvalidArgument) as info:
            device.pipeline(source, buffers=buffers, params=params)
        assert words in str(info.value) and info.value.op == "pipeline"

    def test_bad_inputs(self, device, pipeline):
        bx, by = device.alloc(64), device.alloc(64)
        params = (F(1), F(0), np.uint32(64))
        limit = device.max_buffer_bytes
        cases = [
            lambda: device.dispatch(pipeline, [bx, "not a buffer"], 1, params),
            lambda: device.dispatch("not a pipeline", [bx, by], 1, params),
            lambda: device.dispatch(pipeline, [bx, by], (1, 2, 3, 4), params),
            lambda: device.dispatch(pipeline, [bx, by], (device.max_groups[0] + 1,), params),
            lambda: device.dispatch(pipeline, [bx, by], 2.0, params),
            lambda: device.download(bx, [0.0] * 4),
            lambda: device.upload(np.zeros(4, object)),
            lambda: device.alloc(limit // 4 + 1, "float32"),
            lambda: device.pipeline(SCALE_OFFSET, "not_main", buffers=2, params=3),
            lambda: device.pipeline(b"\x03\x02\x23\x07", buffers=2),
            lambda: device.pipeline(SCALE_OFFSET, buffers=10**6),
        ]
        for case in cases:
            with pytest.raises(InvalidArgument) as info:
                case()
            assert info.value.op and info.value.backend == "opengl"

    def test_more_buffers_than_the_device_binds(self, device):
        limit = device.max_storage_blocks
        with pytest.raises(InvalidArgument) as info:
            device.pipeline(SCALE_OFFSET, buffers=limit + 1, params=3)
        assert info.value.op == "pipeline" and f"GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS ({limit})" in info.value.detail

    def test_a_stale_gl_error_does_not_fail_the_next_upload(self, device):
        import ctypes

        with pytest.raises(CompileError):
            device.pipeline((KERNELS / "broken.comp").read_text(), buffers=2)
        assert device.ctx.error == "GL_NO_ERROR"  # a failed compile leaves no error flag behind
        address = device.ctx.mglo._context.load("glBindBuffer")
        bind_buffer = ctypes.CFUNCTYPE(None, ctypes.c_uint, ctypes.c_uint)(address)
        bind_buffer(0xDEAD, 0)  # GL_INVALID_ENUM, left set as a failed call elsewhere would leave it
        buf = device.upload(np.arange(8, dtype=F))  # must not report that old error as its own
        np.testing.assert_array_equal(device.download(buf), np.arange(8, dtype=F))

    def test_one_buffer_in_two_readonly_bindings(self, device):
        source = HEADER + (
            "layout(std430, binding = 0) readonly buffer A { float a[]; };\n"
            "layout(std430, binding = 1) readonly buffer B { float b[]; };\n"
            "layout(std430, binding = 2) writeonly buffer O { float o[]; };\n"
            "void main() { uint i = gl_GlobalInvocationID.x; o[i] = a[i] * b[i]; }\n")
        p = device.pipeline(source, buffers=3)
        x, out = device.upload(np.arange(64, dtype=F)), device.alloc(64)
        device.dispatch(p, [x, x, out], 1).wait()
        np.testing.assert_array_equal(device.download(out), np.arange(64, dtype=F) ** 2)
        with pytest.raises(InvalidArgument, match="same buffer"):
            device.dispatch(p, [x, out, out], 1)

    def test_buffers_closed_on_another_thread_are_freed_on_this_one(self, device):
        buf = device.alloc(1 << 20)
        worker = threading.Thread(target=buf.close)
        worker.start()
        worker.join()
        assert buf.closed and len(device._garbage) == 1  # queued: GL may not be called from that thread
        kept = device.alloc(4)  # the next call frees it
        assert not device._garbage
        kept.close()

    def test_a_thread_bound_device_takes_no_lock(self, device):
        from ironaccel.compute.base import _UNLOCKED

        assert device._lock is _UNLOCKED  # only the owner thread gets past the checks
        with pytest.raises(ZeroDivisionError):  # the no-op lock lets what is raised inside it out
            with device._lock:
                raise ZeroDivisionError
        with pytest.raises(InvalidArgument):
            device.upload(np.zeros(4, object))
        assert not _UNLOCKED.acquire() and not _UNLOCKED.release()  # the per-call methods' form of it

        from ironaccel.compute import ComputeDeviceBase

        with pytest.raises(TypeError, match="acquire"):  # a backend's own lock must be a lock
            ComputeDeviceBase()._open(device.descriptor, max_buffer_bytes=4, group_limits=(1, 1, 1), lock=object())

    def test_other_thread_is_refused(self, device):
        buf = device.alloc(16)
        errors = []

        def use() -> None:
            try:
                device.download(buf)
            except InvalidState as exc:
                errors.append(exc)

        worker = threading.Thread(target=use)
        worker.start()
        worker.join()
        assert len(errors) == 1 and errors[0].op == "download"

    def test_objects_of_another_device_and_after_close(self, device, pipeline):
        with registry.open("opengl") as other:
            foreign = other.pipeline(SCALE_OFFSET, buffers=2, params=3)
            a, b = device.alloc(64), device.alloc(64)
            with pytest.raises(InvalidArgument):
                device.dispatch(foreign, [a, b], 1, (F(1), F(0), np.uint32(64)))
        buf = device.alloc(64)
        device.close()
        device.close()
        assert buf.closed
        for call in (lambda: device.dispatch(pipeline, [a, b], 1, ()), lambda: device.download(a),
                     lambda: device.pipeline(SCALE_OFFSET, buffers=2, params=3), device.synchronize):
            with pytest.raises(ClosedError):
                call()
        buf.close()


def _probe_in_subprocess(env: dict[str, str]) -> str:
    code = textwrap.dedent("""
        from ironaccel_opengl.backend import Backend
        result = Backend().probe()
        assert not result.available, result
        print(result.reason, "|", result.fix, "|", result.code_name)
    """)
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="EGL through glvnd is a Linux setup")
class TestUnavailable:
    def test_missing_egl_library(self):
        out = _probe_in_subprocess({"GLCONTEXT_LINUX_LIBEGL": "/nonexistent/libEGL.so.1"})
        assert out.startswith("no EGL") and "libegl" in out.lower()

    def test_egl_without_a_vendor_driver(self):
        pytest.importorskip("moderngl")
        out = _probe_in_subprocess({"__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent/vendor.json"})
        assert "lists no device" in out and "libegl-mesa0" in out

    def test_no_opengl_4_3(self):
        from ironaccel_opengl.context import _unavailable

        exc = _unavailable(Exception("eglCreateContext failed (0x3009)"))
        assert "4.3" in exc.reason and (exc.code, exc.code_name) == (0x3009, "EGL_BAD_MATCH")
        exc = _unavailable(ValueError("Requested OpenGL version 430, got version 330"))
        assert "4.3 is required" in exc.reason

    def test_binding_missing(self):
        code = ("import sys; sys.modules['moderngl'] = None\nfrom ironaccel_opengl.backend import Backend\n"
                "r = Backend().probe(); assert not r.available and r.fix == 'pip install moderngl', r")
        subprocess.run([sys.executable, "-c", code], check=True)


def test_importing_the_package_imports_no_moderngl():
    code = ("import sys, ironaccel_opengl, ironaccel_opengl.plugin\n"
            "assert not {'moderngl', 'glcontext'} & set(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)
