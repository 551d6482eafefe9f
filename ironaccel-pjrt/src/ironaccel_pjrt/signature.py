"""The parameter types of a StableHLO program's ``@main``, read from its MLIR text.

Why: PJRT checks an argument against a parameter by byte size only on some
plugins (the XLA CPU client runs a ``f32[2,2]`` buffer as a ``f32[4]`` or an
``i32[4]`` parameter without a word), so ironaccel checks count, element type
and shape itself before `PJRT_LoadedExecutable_Execute`.  Only the text form
is read; for bytecode (or text this reader does not follow) the signature is
unknown and the plugin's own checks are all there is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ironaccel.types import DType

__all__ = ["Parameter", "main_signature"]

_ELEMENT_TYPES = {
    "i1": DType.BOOL,
    "i8": DType.INT8, "si8": DType.INT8,
    "i16": DType.INT16, "si16": DType.INT16,
    "i32": DType.INT32, "si32": DType.INT32,
    "i64": DType.INT64, "si64": DType.INT64,
    "ui8": DType.UINT8, "ui16": DType.UINT16, "ui32": DType.UINT32, "ui64": DType.UINT64,
    "f16": DType.FLOAT16, "bf16": DType.BFLOAT16, "f32": DType.FLOAT32, "f64": DType.FLOAT64,
    "complex<f32>": DType.COMPLEX64, "complex<f64>": DType.COMPLEX128,
}

_MAIN = re.compile(r"func\.func\s+(?:public\s+|private\s+)?@main\s*\(")
_DIM = re.compile(r"(\d+|\?)x")


@dataclass(frozen=True)
class Parameter:
    """One parameter: `shape` (None for a dynamic extent) and `dtype` (None if not a numpy type)."""

    shape: tuple[int | None, ...] | None
    dtype: DType | None

    def describe(self) -> str:
        """The parameter as 'dtype[dims]', with '?' for what is unknown, for error messages."""
        dims = "?" if self.shape is None else ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype.value if self.dtype else '?'}[{dims}]"

    def accepts(self, shape: tuple[int, ...], dtype: DType, check_shape: bool) -> bool:
        """Whether an argument of `shape` and `dtype` fits this parameter (shape checked only when asked)."""
        if self.dtype is not None and dtype is not self.dtype:
            return False
        if not check_shape or self.shape is None:
            return True
        return len(shape) == len(self.shape) and all(p is None or p == s for p, s in zip(self.shape, shape))


def _balanced(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index just past the bracket that closes the one opened before `start`; quoted strings skipped."""
    depth, i, n = 1, start, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError("unbalanced")


def _split_top_level(text: str) -> list[str]:
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    if text[start:].strip():
        parts.append(text[start:])
    return parts


def _parameter(arg: str) -> Parameter:
    _, _, type_text = arg.partition(":")
    type_text = type_text.strip()
    if not type_text.startswith("tensor<"):
        return Parameter(None, None)
    body = type_text[len("tensor<"): _balanced(type_text, len("tensor<"), "<", ">") - 1]
    body = _split_top_level(body)[0].strip()  # drop an encoding after the element type
    dims: list[int | None] = []
    at = 0
    while match := _DIM.match(body, at):
        dims.append(None if match.group(1) == "?" else int(match.group(1)))
        at = match.end()
    return Parameter(tuple(dims), _ELEMENT_TYPES.get(body[at:].strip()))


def main_signature(code: bytes) -> list[Parameter] | None:
    """The parameters of ``@main`` in MLIR text, or None for bytecode or text this cannot read."""
    if code.startswith(b"ML\xefR"):
        return None
    try:
        text = code.decode()
        match = _MAIN.search(text)
        if match is None:
            return None
        end = _balanced(text, match.end(), "(", ")")
        return [_parameter(arg) for arg in _split_top_level(text[match.end(): end - 1])]
    except (UnicodeDecodeError, ValueError):
        return None
