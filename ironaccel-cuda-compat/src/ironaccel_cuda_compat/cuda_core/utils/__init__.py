"""cuda.core's `utils`: StridedMemoryView, program caches, batched copies and managed-memory operations."""

from __future__ import annotations

from .._memory._copy_ops import CopyOptions, MemcpyOverlapMode, MemcpySrcAccessOrder, copy_batch
from .._memory._managed_memory_ops import discard_batch, discard_prefetch_batch, prefetch_batch
from .._memoryview import StridedMemoryView, args_viewable_as_strided_memory
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
