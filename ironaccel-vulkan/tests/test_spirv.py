"""SPIR-V checks and reflection, without a device."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ironaccel.errors import CompileError, InvalidArgument
from ironaccel_vulkan import spirv

KERNELS = Path(__file__).resolve().parent / "kernels"
SCALE_OFFSET = (KERNELS / "scale_offset.spv").read_bytes()
AXPY_INT = (KERNELS / "axpy_int.spv").read_bytes()


def test_reflects_the_scale_offset_kernel() -> None:
    info = spirv.reflect(SCALE_OFFSET)
    assert info.version == (1, 0)
    assert set(info.entry_points) == {"main"}
    main = info.entry_points["main"]
    assert main.model == spirv.MODEL_GLCOMPUTE and main.local_size == (64, 1, 1)
    assert [(b.set, b.binding, b.kind) for b in info.bindings] == [(0, 0, "storage"), (0, 1, "storage")]
    assert info.uses_push_constants and info.push_constant_bytes == 12


def test_reflects_three_bindings() -> None:
    info = spirv.reflect(AXPY_INT)
    assert [b.binding for b in info.bindings] == [0, 1, 2]
    assert info.push_constant_bytes == 12


@pytest.mark.parametrize("form", ["bytes", "bytearray", "memoryview", "words", "list", "big_endian"])
def test_accepts_every_form_of_the_same_module(form: str) -> None:
    words = np.frombuffer(SCALE_OFFSET, "<u4")
    code = {
        "bytes": SCALE_OFFSET,
        "bytearray": bytearray(SCALE_OFFSET),
        "memoryview": memoryview(SCALE_OFFSET),
        "words": words.astype(np.uint32),
        "list": [int(w) for w in words],
        "big_endian": words.astype(">u4").tobytes(),
    }[form]
    out = spirv.to_words(code)
    assert out.dtype == np.uint32 and out[0] == spirv.MAGIC
    np.testing.assert_array_equal(out, words)


@pytest.mark.parametrize(
    "code,match",
    [
        (b"\x03\x02\x23", "whole number"),
        (b"\x03\x02\x23\x07" * 2, "shorter than the 5-word header"),
        (b"GLSL" + SCALE_OFFSET[4:], "magic number"),
        (np.frombuffer(SCALE_OFFSET, "<u4")[:-1].tobytes() + ((7 << 16) | 54).to_bytes(4, "little"), "word count"),
    ],
)
def test_not_spirv_is_a_compile_error(code: bytes, match: str) -> None:
    with pytest.raises(CompileError, match=match) as info:
        spirv.reflect(code)
    assert info.value.op == "pipeline" and info.value.log


def test_zero_word_count_is_caught() -> None:
    words = np.frombuffer(SCALE_OFFSET, "<u4").copy()
    words[5] = 0  # the first instruction's header
    with pytest.raises(CompileError, match="word count 0"):
        spirv.reflect(words)


def test_bad_version_word() -> None:
    words = np.frombuffer(SCALE_OFFSET, "<u4").copy()
    words[1] = 0x00020000
    with pytest.raises(CompileError, match="version"):
        spirv.reflect(words)


@pytest.mark.parametrize("code", ["#version 450\nvoid main() {}", 42, [1.5, 2.5], [-1] * 8, [[1, 2]] * 5,
                                  np.zeros(8, np.float32)])
def test_wrong_input_type_is_invalid_argument(code: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        spirv.to_words(code)
    assert info.value.op == "pipeline"
