"""The compute kit's pieces on their own: waiting, interfaces read from WGSL and GLSL, the checks, the process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ironaccel.compute import (
    WAIT_SLICE,
    Interface,
    StorageBinding,
    buffer_list,
    check_bindings,
    glsl_interface,
    pack_params,
    source_text,
    timeout_seconds,
    wait_for,
    wgsl_interface,
)
from ironaccel.errors import InvalidArgument, IronAccelError, Timeout
from ironaccel.types import DType


class Clock:
    """A block() that finishes after `after` seconds of waiting, recording each slice it was given."""

    def __init__(self, after: float | None):
        self.after = after
        self.waited = 0.0
        self.slices: list[float | None] = []

    def __call__(self, seconds: float | None) -> bool:
        self.slices.append(seconds)
        if seconds is None:
            return True
        if self.after is not None and self.waited + seconds >= self.after:
            return True
        self.waited += seconds
        return False


def test_timeout_is_an_ironaccel_error_and_a_builtin_timeout():
    exc = Timeout("x", "wait", 2.5)
    assert isinstance(exc, IronAccelError) and isinstance(exc, TimeoutError)
    assert str(exc) == "x: wait: the work did not finish within 2.5 s"


def test_wait_none_and_inf_wait_until_done():
    for forever in (None, float("inf"), 10**400):
        clock = Clock(after=None)
        wait_for("x", "wait", clock, forever)
        assert clock.slices == [None]


def test_wait_zero_polls_once():
    clock = Clock(after=None)
    with pytest.raises(Timeout) as info:
        wait_for("x", "wait", clock, 0)
    assert clock.slices == [0.0]
    assert info.value.timeout == 0 and info.value.op == "wait"
    done = Clock(after=0.0)
    wait_for("x", "wait", done, 0)
    assert done.slices == [0.0]


def test_long_waits_are_sliced_so_nothing_overflows():
    clock = Clock(after=3.5)
    wait_for("x", "wait", clock, 1e11)
    assert all(s is not None and 0 < s <= WAIT_SLICE for s in clock.slices)
    assert len(clock.slices) == 4


def test_a_bounded_wait_that_runs_out_raises_timeout():
    slept: list[float] = []

    def never(seconds: float | None) -> bool:
        assert seconds is not None
        slept.append(seconds)
        import time

        time.sleep(seconds)
        return False

    with pytest.raises(Timeout):
        wait_for("x", "wait", never, 0.05)
    assert 0 < sum(slept) < 1


@pytest.mark.parametrize("bad", [float("nan"), -1, -1e-300, -(10**400), "1", [1], True, np.array([1.0])])
def test_bad_timeouts_are_invalid_argument(bad):
    with pytest.raises(InvalidArgument):
        timeout_seconds("x", bad)
    clock = Clock(after=0.0)
    with pytest.raises(InvalidArgument):
        wait_for("x", "wait", clock, bad)
    assert clock.slices == []  # refused before any wait


def test_timeouts_of_every_numeric_kind():
    assert timeout_seconds("x", np.float32(0.5)) == 0.5
    assert timeout_seconds("x", np.int64(3)) == 3.0
    assert timeout_seconds("x", 0) == 0.0
    assert timeout_seconds("x", float("inf")) is None


def test_buffer_and_params_lists():
    assert buffer_list("x", (1, 2), 2) == (1, 2)
    for bad in (None, 5, (b for b in (1, 2)), iter([1, 2]), "ab", b"ab", {1, 2}):
        with pytest.raises(InvalidArgument):
            buffer_list("x", bad, 2)
    assert pack_params("x", np.array([1, 2], np.float32), 2) == np.array([1, 2], "<f4").tobytes()
    assert pack_params("x", [1.5, 7, 2**31], 3) == np.array([1.5], "<f4").tobytes() + \
        np.array([7], "<i4").tobytes() + np.array([2**31], "<u4").tobytes()
    for bad in (None, 5, (p for p in (1.0,)), "a"):
        with pytest.raises(InvalidArgument):
            pack_params("x", bad, 1)


def test_pipeline_refuses_more_buffers_than_the_device_binds():
    from ironaccel.testing.double import SCALE_OFFSET, MemoryBackend, MemoryDevice

    class TwoBindings(MemoryDevice):
        binding_limit_name = "the double's two bindings"

        def __init__(self, descriptor):
            self._open(descriptor, max_buffer_bytes=1 << 20, group_limits=(8, 8, 8), max_buffers=2)

    device = TwoBindings(MemoryBackend().devices()[0])
    device.pipeline(SCALE_OFFSET, buffers=2, params=3).close()
    with pytest.raises(InvalidArgument) as info:
        device.pipeline(SCALE_OFFSET, buffers=3, params=3)
    assert info.value.op == "pipeline" and info.value.detail == "buffers=3 is over the double's two bindings (2)"
    device.close()


def test_source_text_refuses_what_a_compiler_would_misread():
    assert source_text("x", b"void main() {}", "GLSL") == "void main() {}"
    for bad in ("a\0b", "a\ud800", b"a\0b", b"\xff", b"\x03\x02\x23\x07rest", 12, None, ["main"]):
        with pytest.raises(InvalidArgument):
            source_text("x", bad, "GLSL")


WGSL = """
struct P { a: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<i32>>;
@group(0) @binding(2) var<storage> z: array<atomic<u32>>;
@group(0)
@binding(3) var<storage, read_write> s: array<P>;
@group(0) @binding(4) var<storage, read> h: array<vec2h, 16>;
// @group(0) @binding(5) var<storage, read_write> gone: array<f32>;
@group(1) @binding(0) var<storage, read_write> other: array<f32>;
@group(0) @binding(6) var<uniform> u: P;
"""


def test_wgsl_interface():
    assert wgsl_interface(WGSL) == [
        StorageBinding(0, DType.FLOAT32, False, "x"), StorageBinding(1, DType.INT32, True, "y"),
        StorageBinding(2, DType.UINT32, False, "z"), StorageBinding(3, None, True, "s"),
        StorageBinding(4, DType.FLOAT16, False, "h"),
    ]


GLSL = """#version 430
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { uvec4 y[]; };
layout(std430, binding = 2) buffer Z { restrict readonly double z[]; };
layout(std430, binding = 3) buffer S { uint count; float data[]; };
/* layout(std430, binding = 4) buffer Gone { float gone[]; }; */
layout(std140, binding = 0) uniform Params { float a; };
"""


def test_glsl_interface():
    assert glsl_interface(GLSL) == [
        StorageBinding(0, DType.FLOAT32, False, "x"), StorageBinding(1, DType.UINT32, True, "y"),
        StorageBinding(2, DType.FLOAT64, False, "z"), StorageBinding(3, None, True, "S"),
    ]
    macro = "#define T int\nlayout(std430, binding = 0) buffer X { T x[]; };"
    assert glsl_interface(macro) == [StorageBinding(0, None, True, "x")]


class Buf:
    def __init__(self, dtype: DType):
        self.dtype = dtype


def test_binding_rules():
    interface = Interface.of(3, [StorageBinding(0, DType.FLOAT32, False), StorageBinding(1, None, False),
                                 StorageBinding(2, DType.INT32, True)])
    a, b, c = Buf(DType.FLOAT32), Buf(DType.INT32), Buf(DType.FLOAT32)
    check_bindings("x", interface, [a, c, b])
    check_bindings("x", interface, [a, a, b])  # bound twice, both bindings read-only: fine
    with pytest.raises(InvalidArgument, match="same buffer"):
        check_bindings("x", interface, [a, b, b])  # binding 2 may be written
    with pytest.raises(InvalidArgument, match="declares binding 0 as float32"):
        check_bindings("x", interface, [b, a, b])
    twice = Interface.of(2, [StorageBinding(0, DType.FLOAT32, False), StorageBinding(0, DType.INT32, False)])
    assert twice == Interface((None, None), (True, True))  # declared twice (an #ifdef): unknown


def test_runtime_dir_is_private_when_unset_and_kept_when_valid(tmp_path):
    code = textwrap.dedent("""
        import os, stat
        from ironaccel.compute import ensure_runtime_dir
        folder = ensure_runtime_dir()
        assert os.environ["XDG_RUNTIME_DIR"] == folder and os.path.isdir(folder), folder
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        assert ensure_runtime_dir() == folder
        print(folder)
    """)
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    for value in (None, "", "relative/dir", str(tmp_path / "missing")):
        if value is not None:
            env["XDG_RUNTIME_DIR"] = value
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        folder = out.stdout.strip()
        assert folder != value and not os.path.exists(folder)  # removed at exit
    env["XDG_RUNTIME_DIR"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code.replace("assert stat", "# ")], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == str(tmp_path)
