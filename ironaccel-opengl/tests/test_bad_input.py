"""Bad params counts that reached GL unchecked: a params buffer past GL's limits, or smaller than the block."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ironaccel.errors import InvalidArgument

KERNELS = Path(__file__).with_name("kernels")
SCALE_OFFSET = (KERNELS / "scale_offset.comp").read_text()
MULTIPLY = (KERNELS / "multiply_in_place.comp").read_text()  # three buffers, no uniform block
#: A params block of 8 std140 vec4s (128 bytes): three params fill one vec4 only.
WIDE_BLOCK = """#version 430
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Y { float y[]; };
layout(std140, binding = 0) uniform Params { float a; float b; uint n; float table[7]; };
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) { y[i] = a * table[6] + b; }
}
"""

pytestmark = pytest.mark.backend("opengl")


def test_more_params_than_a_uniform_block_holds_are_refused_at_pipeline(device) -> None:
    limit = int(device.ctx.info["GL_MAX_UNIFORM_BLOCK_SIZE"]) // 4
    # A shader without a params block used to get a uniform buffer of 4 * params bytes: 4 GB for 10**9
    # (GL's error left unread), an OverflowError out of moderngl for 1 << 70.
    for params in (limit + 1, 10**9, 1 << 70):
        with pytest.raises(InvalidArgument) as info:
            device.pipeline(MULTIPLY, buffers=3, params=params, workgroup_size=(8, 8))
        assert info.value.op == "pipeline"
        assert info.value.detail == f"params={params} is over GL_MAX_UNIFORM_BLOCK_SIZE / 4 ({limit})"
    device.pipeline(MULTIPLY, buffers=3, params=5, workgroup_size=(8, 8)).close()  # unread params still pass


@pytest.mark.parametrize("params", [1, 3, 5])
def test_a_params_block_larger_than_the_params_buffer_is_refused(device, params: int) -> None:
    # params=N other than the block's 4 fields means N 32-bit words: the shader would read table[] past the end
    # of the 16 or 32 bytes they fill.
    with pytest.raises(InvalidArgument) as info:
        device.pipeline(WIDE_BLOCK, buffers=1, params=params)
    assert info.value.op == "pipeline" and "larger than the" in info.value.detail
    assert device.ctx.error == "GL_NO_ERROR"


def test_params_as_many_as_the_block_has_fields_take_the_typed_block(device) -> None:
    pipe = device.pipeline(WIDE_BLOCK, buffers=1, params=4)
    block = pipe.interface.params
    assert block is not None and block.names == ("a", "b", "n", "table") and block.size >= 128 - 12
    y = device.upload(np.zeros(64, np.float32))
    table = np.arange(7, dtype=np.float32)
    device.dispatch(pipe, [y], 1, {"a": 2.0, "b": 1.0, "n": 64, "table": table}).wait()
    np.testing.assert_array_equal(device.download(y), np.full(64, 2 * 6 + 1, np.float32))


def test_a_block_member_past_the_params_given_reads_zero(device) -> None:
    # params=2 fills a and b; the block's n lies in the same 16-byte buffer and reads 0, so nothing is written
    # (a buffer reserved uninitialised gave n whatever the memory held).
    pipe = device.pipeline(SCALE_OFFSET, buffers=2, params=2)
    x = device.upload(np.arange(64, dtype=np.float32))
    y = device.upload(np.full(64, 7, np.float32))
    device.dispatch(pipe, [x, y], 1, (np.float32(2), np.float32(1))).wait()
    np.testing.assert_array_equal(device.download(y), np.full(64, 7, np.float32))


def test_a_params_buffer_that_cannot_be_made_releases_the_linked_shader(device) -> None:
    from ironaccel_opengl.pipeline import OpenGLProgram

    made: list = []

    class Ctx:  # the device's context, except that the params buffer cannot be made
        def __getattr__(self, name):
            return getattr(device.ctx, name)

        def compute_shader(self, code):
            made.append(device.ctx.compute_shader(code))
            return made[-1]

        def buffer(self, *args, **kwargs):
            raise MemoryError("no room for the params buffer")

    with pytest.raises(MemoryError):
        OpenGLProgram(Ctx(), SCALE_OFFSET, 2, 3)
    assert len(made) == 1 and type(made[0].mglo).__name__ == "InvalidObject"  # released: not left to the context
