"""Typed NVRTC options (`CompileOptions`), imported only when a program uses options."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import invalid as _invalid

__all__ = ["CompileOptions"]


@dataclass(frozen=True)
class CompileOptions:
    """Typed NVRTC options.  `None` leaves NVRTC's default.

    std: "c++11" / "c++14" / "c++17" / "c++20".  defines: {"NAME": value or
    None} or ["NAME", "NAME=VALUE"].  include_paths: folders for #include.
    fast_math: --use_fast_math (implies ftz, fast division and sqrt, fmad).
    ftz / prec_div / prec_sqrt / fmad: the individual switches.
    max_registers: --maxrregcount.  line_info: -lineinfo.  debug: -G.
    relocatable_device_code: -rdc=true, separate compilation: code that calls
    device functions of other inputs or of the device runtime (dynamic
    parallelism, `cudaGraphSetConditional`), linked with `Linker`.
    extra: further raw NVRTC options, passed last.
    """

    std: str | None = None
    defines: Mapping[str, Any] | Sequence[str] = field(default_factory=dict)
    include_paths: Sequence[str] = ()
    fast_math: bool = False
    ftz: bool | None = None
    prec_div: bool | None = None
    prec_sqrt: bool | None = None
    fmad: bool | None = None
    max_registers: int | None = None
    line_info: bool = False
    debug: bool = False
    relocatable_device_code: bool = False
    extra: Sequence[str] = ()

    def __post_init__(self) -> None:
        op = "CompileOptions"
        if self.std is not None and not re.fullmatch(r"c\+\+(03|11|14|17|20|23)", str(self.std)):
            raise _invalid(op, f"std must look like 'c++17', got {self.std!r}")
        for name in ("fast_math", "line_info", "debug", "relocatable_device_code"):
            if not isinstance(getattr(self, name), bool):
                raise _invalid(op, f"{name} must be a bool, got {getattr(self, name)!r}")
        for name in ("ftz", "prec_div", "prec_sqrt", "fmad"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise _invalid(op, f"{name} must be a bool or None, got {value!r}")
        if self.max_registers is not None and (
            isinstance(self.max_registers, bool) or not isinstance(self.max_registers, int) or self.max_registers <= 0
        ):
            raise _invalid(op, f"max_registers must be a positive int, got {self.max_registers!r}")
        if isinstance(self.include_paths, (str, bytes)) or isinstance(self.extra, (str, bytes)):
            raise _invalid(op, "include_paths and extra are sequences of str, not a single str")
        for item in (*self.include_paths, *self.extra):
            if not isinstance(item, str) or "\0" in item:
                raise _invalid(op, f"include_paths and extra hold str without NUL, got {item!r}")
        if isinstance(self.defines, (str, bytes)):
            raise _invalid(op, "defines is a mapping or a sequence of 'NAME[=VALUE]', not a single str")
        for name in self._define_args():
            if not re.fullmatch(r"-D[A-Za-z_]\w*(=.*)?", name, re.S):
                raise _invalid(op, f"bad define {name[2:]!r}")

    def _define_args(self) -> list[str]:
        if isinstance(self.defines, Mapping):
            return [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in self.defines.items()]
        return [f"-D{d}" for d in self.defines]

    def _args(self) -> tuple[str, ...]:
        """to_args() as a tuple, computed once (the options are frozen)."""
        try:
            return self.__dict__["_cached_args"]
        except KeyError:
            args = tuple(self.to_args())
            object.__setattr__(self, "_cached_args", args)
            return args

    def to_args(self) -> list[str]:
        """The NVRTC option strings (without the architecture)."""
        args: list[str] = []
        if self.std:
            args.append(f"--std={self.std}")
        args += self._define_args()
        args += [f"--include-path={p}" for p in self.include_paths]
        if self.fast_math:
            args.append("--use_fast_math")
        for name, flag in (("ftz", "--ftz"), ("prec_div", "--prec-div"), ("prec_sqrt", "--prec-sqrt"),
                           ("fmad", "--fmad")):
            value = getattr(self, name)
            if value is not None:
                args.append(f"{flag}={'true' if value else 'false'}")
        if self.max_registers is not None:
            args.append(f"--maxrregcount={self.max_registers}")
        if self.line_info:
            args.append("--generate-line-info")
        if self.debug:
            args.append("--device-debug")
        if self.relocatable_device_code:
            args.append("--relocatable-device-code=true")
        args += [str(x) for x in self.extra]
        return args
