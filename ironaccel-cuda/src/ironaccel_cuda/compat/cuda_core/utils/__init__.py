"""cuda.core's `utils`: StridedMemoryView, program caches, batched copies and managed-memory operations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import _needs
from .._memory._managed_memory_ops import discard_batch, discard_prefetch_batch, prefetch_batch
from .._memoryview import StridedMemoryView, args_viewable_as_strided_memory
from .._missing import missing_function
from ..typing import StrEnum
from ._program_cache import FileStreamProgramCache, InMemoryProgramCache, ProgramCacheResource, make_program_cache_key

__all__ = [
    "CopyOptions",
    "FileStreamProgramCache",
    "InMemoryProgramCache",
    "MemcpyOverlapMode",
    "MemcpySrcAccessOrder",
    "ProgramCacheResource",
    "StridedMemoryView",
    "args_viewable_as_strided_memory",
    "copy_batch",
    "discard_batch",
    "discard_prefetch_batch",
    "make_program_cache_key",
    "prefetch_batch",
]


class MemcpySrcAccessOrder(StrEnum):
    STREAM = "stream"
    DURING_API_CALL = "during_api_call"
    ANY = "any"


class MemcpyOverlapMode(StrEnum):
    DEFAULT = "default"
    PREFER_OVERLAP_WITH_COMPUTE = "prefer_overlap_with_compute"


@dataclass(frozen=True)
class CopyOptions:
    """Per-copy attributes of a batched copy (copy_batch is not in the compat yet)."""

    src_access_order: Any = "stream"
    src_location_hint: Any = None
    dst_location_hint: Any = None
    overlap_mode: Any = "default"


copy_batch = missing_function("copy_batch", _needs.COPY_BATCH, __name__)
