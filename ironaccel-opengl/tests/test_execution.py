"""OpenGL's side of the execution model: what GL lacks says why, constants as #defines, batch replays leave no GL
error, timestamps from GL_TIMESTAMP queries, host memory, and import_memory (GL_EXT_memory_object_fd) refusing
what it cannot take.  The Vulkan -> GL hand-over is test_interop.py's."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ironaccel.compute.execution import ExternalMemory
from ironaccel.errors import ClosedError, CompileError, InvalidArgument, InvalidState, Unsupported
from ironaccel.registry import registry
from ironaccel.types import DType

pytestmark = pytest.mark.backend("opengl")

KERNELS = Path(__file__).with_name("kernels")
SCALE_OFFSET = (KERNELS / "scale_offset.comp").read_text()
CONSTANTS = (KERNELS / "constants.comp").read_text()
TYPED = (KERNELS / "typed_params.comp").read_text()


def test_one_queue_and_no_export_say_why(device) -> None:
    with pytest.raises(Unsupported) as info:
        device.create_queue()
    assert "one in-order command stream" in str(info.value)
    with pytest.raises(Unsupported) as info:
        device.alloc(16, exportable=True)
    assert "cannot export memory" in str(info.value)
    assert device.max_queues == 1 and "queues" not in device.features


def test_constants_are_defines_after_version_and_each_set_is_a_program(device) -> None:
    a = device.pipeline(CONSTANTS, buffers=2, constants={"SCALE": 2.0, "BIAS": 1})
    b = device.pipeline(CONSTANTS, buffers=2, constants={"SCALE": 2.0, "BIAS": 2})
    again = device.pipeline(CONSTANTS, buffers=2, constants={"SCALE": 2.0, "BIAS": 1})
    assert a.program is again.program and a.program is not b.program
    listed = {c.name: c for c in a.interface.constants}
    assert listed["SCALE"].dtype is DType.FLOAT32 and listed["BIAS"].dtype is DType.INT32
    assert listed["SCALE"].default == 1.0 and listed["BIAS"].default == 0
    assert a.interface.params is not None and a.interface.params.names == ("n",)
    x, y = device.upload(np.arange(64, dtype=np.float32)), device.alloc(64, "float32")
    device.dispatch(b, [x, y], 1, {"n": 64})
    np.testing.assert_array_equal(device.download(y), np.arange(64, dtype=np.float32) * 2 + 2)
    for bad in ({"BIAS": True}, {"BIAS": 2**40}, {"SCALE": "1"}, {"OTHER": 1}):
        with pytest.raises(InvalidArgument) as info:
            device.pipeline(CONSTANTS, buffers=2, constants=bad)
        assert info.value.op == "pipeline"
    with pytest.raises(InvalidArgument):
        device.pipeline(SCALE_OFFSET, buffers=2, constants={"SCALE": 1.0})  # declares none
    broken = CONSTANTS.replace("float(BIAS);", "float(BIAS)")
    logs = []
    for constants in ({}, {"BIAS": 3, "SCALE": 0.5}):
        with pytest.raises(CompileError) as error:
            device.pipeline(broken, buffers=2, constants=constants)
        logs.append(str(error.value))
    assert logs[0] == logs[1]  # the injected lines are followed by #line: the log's line numbers are the source's


def test_typed_params_offsets_match_gl_introspection(device) -> None:
    block = device.pipeline(TYPED, buffers=2).interface.params
    assert [f.offset for f in block.fields] == [0, 8, 16, 20]  # std140, as glGetProgramResourceiv reports
    bindings = device.pipeline(TYPED, buffers=2).interface.bindings
    assert [(b.name, b.writable) for b in bindings] == [("x", False), ("y", True)]


def test_batch_replay_leaves_no_gl_error_and_reads_rerecord(device) -> None:
    pipe = device.pipeline(SCALE_OFFSET, buffers=2, params=3)
    n = 256
    x, y = device.upload(np.arange(n, dtype=np.float32)), device.alloc(n, "float32")
    out, other = np.zeros(n, np.float32), np.zeros(n, np.float32)
    batch = device.batch(timestamps=True)
    batch.fill(y, np.float32(-1))
    run = batch.dispatch(pipe, [x, y], 4, (np.float32(3), np.float32(0), np.uint32(n)))
    read = batch.read(y, out)
    for _ in range(2):
        sub = device.submit(batch)
        timings = sub.timings(timeout=60)
        assert len(timings.spans) == 3 and timings.total_ns > 0
        np.testing.assert_array_equal(out, np.arange(n, dtype=np.float32) * 3)
    read.update(out=other)
    run.update(params=(np.float32(1), np.float32(1), np.uint32(n // 2)))
    device.submit(batch).wait(timeout=60)
    expected = np.concatenate([np.arange(n // 2, dtype=np.float32) + 1, np.full(n // 2, -1, np.float32)])
    np.testing.assert_array_equal(other, expected)
    assert device.ctx.error == "GL_NO_ERROR"
    batch.close()


def test_host_memory_is_mapped_for_its_life(device) -> None:
    buf = device.alloc(64, "int32", memory="host")
    view = np.asarray(buf)
    view[:] = np.arange(64)
    device.write(buf, np.full(32, 5, np.int32))  # ordered GL write, seen through the same mapping
    device.synchronize()
    np.testing.assert_array_equal(view[:32], 5)
    np.testing.assert_array_equal(device.download(buf)[32:], np.arange(32, 64))
    with pytest.raises(InvalidState):
        np.from_dlpack(device.alloc(4, "float32"))  # device memory is not host-visible
    buf.close()


def test_import_memory_refuses_what_gl_cannot_take(device) -> None:
    if "import_memory" not in device.features:
        with pytest.raises(Unsupported) as info:
            device.import_memory(ExternalMemory(-1, 16), 4)
        assert "GL_EXT_memory_object_fd" in str(info.value)
        return
    def open_fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    read_end, write_end = os.pipe()
    with open(__file__, "rb") as small, ExternalMemory(read_end, 1 << 20) as pipe_ext, \
            ExternalMemory(os.dup(small.fileno()), 1 << 30) as small_ext:
        before = open_fds()
        for ext, why in ((pipe_ext, "not exported memory"), (small_ext, "holds")):
            with pytest.raises(InvalidArgument) as info:  # refused before GL: llvmpipe blocks reading a pipe
                device.import_memory(ext, 16)
            assert info.value.op == "import_memory" and why in str(info.value)
        assert open_fds() == before  # the duplicates given to the import are closed
    os.close(write_end)
    with pytest.raises((InvalidArgument, ClosedError)):
        device.import_memory(ExternalMemory(-1, 16), 4)  # no fd
    fd = os.memfd_create("not-an-exported-allocation")
    os.ftruncate(fd, 4096)
    with ExternalMemory(fd, 4096) as ext:
        before = open_fds()
        try:
            buf = device.import_memory(ext, 1024)
        except InvalidArgument as exc:
            assert exc.op == "import_memory" and open_fds() == before
        else:  # a driver that takes any fd: it must then be the fd's memory
            np.testing.assert_array_equal(device.download(buf), np.zeros(1024, np.float32))
            buf.close()
        with pytest.raises(InvalidArgument):
            device.import_memory(ext, 2048)  # larger than the memory
    with pytest.raises(ClosedError):
        device.import_memory(ext, 16)  # closed
    device.dispatch(device.pipeline(SCALE_OFFSET, buffers=2, params=3), [device.upload(np.ones(64, np.float32)),
                    device.alloc(64, "float32")], 1, (np.float32(1), np.float32(0), np.uint32(64))).wait()
    assert device.ctx.error == "GL_NO_ERROR"


def test_timestamps_are_ns_within_the_wall_clock(device) -> None:
    if "timestamps" not in device.features:
        return
    import time

    pipe = device.pipeline(SCALE_OFFSET, buffers=2, params=3)
    n = 1 << 18
    x, y = device.upload(np.ones(n, np.float32)), device.alloc(n, "float32")
    batch = device.batch(timestamps=True)
    for _ in range(4):
        batch.dispatch(pipe, [x, y], (n // 64 // 64, 64), (np.float32(2), np.float32(0), np.uint32(n)))
    device.synchronize()
    start = time.perf_counter_ns()
    sub = device.submit(batch)
    sub.wait(timeout=60)
    wall = time.perf_counter_ns() - start
    timings = sub.timings()
    assert 0 < timings.total_ns <= wall  # a wrong tick unit would land far outside
    assert sum(timings.commands_ns) <= timings.total_ns
    batch.close()


def test_dlpack_of_another_device_is_refused(device) -> None:
    class OnCuda:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kwargs):
            raise AssertionError("not to be called")

    with pytest.raises(InvalidArgument) as info:
        device.from_dlpack(OnCuda())
    assert info.value.op == "from_dlpack" and "kDLCUDA" in str(info.value)
    host = device.alloc(8, "float32", memory="host")
    assert host.__dlpack_device__() == (1, 0)
    view = np.from_dlpack(host)
    view[:] = 3
    np.testing.assert_array_equal(device.download(host), np.full(8, 3, np.float32))


def test_constant_defaults_are_read_as_glsl_literals() -> None:
    from ironaccel_opengl.execution import declared_constants

    def guarded(name: str, value: str) -> str:
        return f"#ifndef {name}\n#define {name} {value}\n#endif\n"

    code = "#version 430\n" + "".join(guarded(n, v) for n, v in [
        ("OCT", "010"), ("HEX", "0x1Fu"), ("F", "-2.5e1f"), ("B", "true"), ("BAD", "09"), ("CALL", "f(1)")])
    found = {c.name: (c.dtype, c.default) for c in declared_constants(code)}
    assert found == {"OCT": (DType.INT32, 8), "HEX": (DType.UINT32, 31), "F": (DType.FLOAT32, -25.0),
                     "B": (DType.BOOL, True), "BAD": (None, "09"), "CALL": (None, "f(1)")}


def test_cleanup_of_another_device_leaves_this_context_current(device) -> None:
    """A finalizer can run inside this device's call; the other device's cleanup must not leave its context
    current (the rest of the call would go to it)."""
    import gc

    from ironaccel_opengl.context import KeepCurrent

    other = registry.open("opengl", 0)
    try:
        fence, batch = other.create_fence(0), other.batch()
        host = other.alloc(16, "float32", memory="host")
        view = np.asarray(host)
        host.close()  # freed when the view goes
        device.download(device.upload(np.zeros(4, np.float32)))  # this device's context is current now
        with KeepCurrent() as before:
            pass
        del fence, batch, view
        gc.collect()
        with KeepCurrent() as after:
            pass
        assert after._saved == before._saved
        x = np.arange(64, dtype=np.float32)
        np.testing.assert_array_equal(device.download(device.upload(x)), x)
    finally:
        other.close()
