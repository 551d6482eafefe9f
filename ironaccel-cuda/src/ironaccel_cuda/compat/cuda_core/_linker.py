"""cuda.core's `Linker` and `LinkerOptions`: the options are here, linking waits for issue 15."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import _needs
from ._missing import missing_class

__all__ = ["Linker", "LinkerOptions"]


@dataclass
class LinkerOptions:
    """Options of a link (nvJitLink or the driver's cuLink)."""

    name: str | None = "<default linker>"
    arch: str | None = None
    max_register_count: int | None = None
    time: bool | None = None
    verbose: bool | None = None
    link_time_optimization: bool | None = None
    ptx: bool | None = None
    optimization_level: int | None = None
    debug: bool | None = None
    lineinfo: bool | None = None
    ftz: bool | None = None
    prec_div: bool | None = None
    prec_sqrt: bool | None = None
    fma: bool | None = None
    kernels_used: Any = None
    variables_used: Any = None
    optimize_unused_variables: bool | None = None
    ptxas_options: Any = None
    split_compile: int | None = None
    split_compile_extended: int | None = None
    no_cache: bool | None = None
    numba_debug: bool | None = None


Linker = missing_class("Linker", _needs.LINKER, __name__)


def _nvjitlink_has_version_symbol(nvjitlink: Any) -> bool:
    try:
        nvjitlink.version()
    except Exception:
        return False
    return True


def _decide_nvjitlink_or_driver() -> bool:
    """True when linking would use the driver (cuLink*), False when nvJitLink is usable (as cuda.core decides)."""
    try:
        from cuda.bindings import nvjitlink
    except ImportError:
        return True
    return not _nvjitlink_has_version_symbol(nvjitlink)
