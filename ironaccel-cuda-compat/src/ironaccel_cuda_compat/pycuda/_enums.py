"""PyCUDA's enumerations and flag classes, read from `cuda.bindings` rather than written out again.

Each PyCUDA enum (`device_attribute`, `ctx_flags`, ...) is an `IntEnum` made
from the matching `cuda.bindings.driver` enum with its `CU_..._` prefix cut
off, so it has every value the installed binding knows (PyCUDA's names are a
subset).  As with PyCUDA's Boost.Python enums, members are ints, `str()` is
the bare name, and the classes carry `names` (name -> member) and `values`
(int -> member).  The flag holders (`host_alloc_flags`, `array3d_flags`, ...)
are plain classes of int constants, as in PyCUDA.
"""

from __future__ import annotations

import enum
from typing import Any

from cuda.bindings import driver as _cb

__all__ = [
    "ipc_mem_flags", "ctx_flags", "event_flags", "stream_flags", "array_format", "address_mode", "filter_mode",
    "device_attribute", "pointer_attribute", "profiler_output_mode", "func_cache", "shared_config",
    "function_attribute", "memory_type", "compute_mode", "jit_option", "jit_target", "jit_fallback",
    "jit_input_type", "limit", "mem_attach_flags", "graphics_register_flags", "array_cubemap_face",
    "host_alloc_flags", "mem_host_register_flags", "mem_peer_register_flags", "array3d_flags",
    "TRSA_OVERRIDE_FORMAT", "TRSF_READ_AS_INTEGER", "TRSF_NORMALIZED_COORDINATES", "TR_DEFAULT",
]


class _Enum(enum.IntEnum):
    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


def _make(name: str, source: str, prefix: str, skip: tuple[str, ...] = (), extra: dict[str, int] | None = None,
          fallback: dict[str, int] | None = None) -> Any:
    members: dict[str, int] = {}
    cb = getattr(_cb, source, None)
    if cb is not None:
        for full, member in cb.__members__.items():
            short = full[len(prefix):] if full.startswith(prefix) else full
            if short in skip or not short:
                continue
            members.setdefault(short, int(member))
    elif fallback:
        members.update(fallback)
    for alias, value in (extra or {}).items():
        members.setdefault(alias, value)
    cls: Any = _Enum(name, members)  # type: ignore[call-arg, arg-type]
    cls.__module__ = __name__
    cls.names = dict(cls.__members__)  # type: ignore[attr-defined]
    cls.values = {int(m): m for m in cls}  # type: ignore[attr-defined]
    return cls


ipc_mem_flags = _make("ipc_mem_flags", "CUipcMem_flags", "CU_IPC_MEM_")
ctx_flags = _make("ctx_flags", "CUctx_flags", "CU_CTX_")
event_flags = _make("event_flags", "CUevent_flags", "CU_EVENT_")
stream_flags = _make("stream_flags", "CUstream_flags", "CU_STREAM_")
array_format = _make("array_format", "CUarray_format", "CU_AD_FORMAT_", skip=("MAX",))
address_mode = _make("address_mode", "CUaddress_mode", "CU_TR_ADDRESS_MODE_")
filter_mode = _make("filter_mode", "CUfilter_mode", "CU_TR_FILTER_MODE_")
device_attribute = _make("device_attribute", "CUdevice_attribute", "CU_DEVICE_ATTRIBUTE_", skip=("MAX",))
pointer_attribute = _make("pointer_attribute", "CUpointer_attribute", "CU_POINTER_ATTRIBUTE_")
profiler_output_mode = _make("profiler_output_mode", "CUoutput_mode", "CU_OUT_",
                             fallback={"KEY_VALUE_PAIR": 0, "CSV": 1})
func_cache = _make("func_cache", "CUfunc_cache", "CU_FUNC_CACHE_")
shared_config = _make("shared_config", "CUsharedconfig", "CU_SHARED_MEM_CONFIG_")
function_attribute = _make("function_attribute", "CUfunction_attribute", "CU_FUNC_ATTRIBUTE_")
memory_type = _make("memory_type", "CUmemorytype", "CU_MEMORYTYPE_")
compute_mode = _make("compute_mode", "CUcomputemode", "CU_COMPUTEMODE_")
jit_option = _make("jit_option", "CUjit_option", "CU_JIT_", skip=("NUM_OPTIONS",))
jit_target = _make("jit_target", "CUjit_target", "CU_TARGET_")
jit_fallback = _make("jit_fallback", "CUjit_fallback", "CU_")
jit_input_type = _make("jit_input_type", "CUjitInputType", "CU_JIT_INPUT_", skip=("CU_JIT_NUM_INPUT_TYPES",))
limit = _make("limit", "CUlimit", "CU_LIMIT_", skip=("MAX",))
mem_attach_flags = _make("mem_attach_flags", "CUmemAttach_flags", "CU_MEM_ATTACH_")
graphics_register_flags = _make("graphics_register_flags", "CUgraphicsRegisterFlags", "CU_GRAPHICS_REGISTER_FLAGS_")
array_cubemap_face = _make("array_cubemap_face", "CUarray_cubemap_face", "CU_CUBEMAP_FACE_")


class host_alloc_flags:
    PORTABLE = _cb.CU_MEMHOSTALLOC_PORTABLE
    DEVICEMAP = _cb.CU_MEMHOSTALLOC_DEVICEMAP
    WRITECOMBINED = _cb.CU_MEMHOSTALLOC_WRITECOMBINED


class mem_host_register_flags:
    PORTABLE = _cb.CU_MEMHOSTREGISTER_PORTABLE
    DEVICEMAP = _cb.CU_MEMHOSTREGISTER_DEVICEMAP


class mem_peer_register_flags:
    pass


class array3d_flags:
    ARRAY3D_2DARRAY = _cb.CUDA_ARRAY3D_2DARRAY
    ARRAY3D_LAYERED = _cb.CUDA_ARRAY3D_LAYERED
    SURFACE_LDST = _cb.CUDA_ARRAY3D_SURFACE_LDST
    CUBEMAP = _cb.CUDA_ARRAY3D_CUBEMAP
    TEXTURE_GATHER = _cb.CUDA_ARRAY3D_TEXTURE_GATHER


setattr(array3d_flags, "2DARRAY", _cb.CUDA_ARRAY3D_2DARRAY)

TRSA_OVERRIDE_FORMAT = _cb.CU_TRSA_OVERRIDE_FORMAT
TRSF_READ_AS_INTEGER = _cb.CU_TRSF_READ_AS_INTEGER
TRSF_NORMALIZED_COORDINATES = _cb.CU_TRSF_NORMALIZED_COORDINATES
TR_DEFAULT = _cb.CU_PARAM_TR_DEFAULT
