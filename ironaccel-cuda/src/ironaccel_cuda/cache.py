"""The compiled-program cache: in memory, then on disk.

Keyed on everything that changes the output: the source, the header
sources, the name expressions, the NVRTC option list, the target kind
(ptx/cubin), the architecture and the NVRTC build (see `cache_key`; how the
NVRTC build is identified without loading it is explained in `program`).
In front of the memory cache sits a dict keyed on the inputs exactly as
given (`fast_get`), so a repeated compile in one process costs a tuple hash.

Environment, read at every lookup:

* ``IRONACCEL_CUDA_CACHE=0`` turns both caches off.
* ``IRONACCEL_CUDA_CACHE_DIR=/path`` moves the disk cache (default
  ``$XDG_CACHE_HOME/ironaccel/cuda`` or ``~/.cache/ironaccel/cuda``).

Disk entries are written to a temporary file in the cache folder and renamed
into place, so readers never see a partial file.  Each entry carries a magic,
its own key and a SHA-256 of its contents; an entry that fails any check
(corrupt, truncated, foreign) is a miss, is deleted, and is rewritten after
the recompile.  A cache folder that cannot be written is skipped silently.

What the disk cache returns runs on the GPU, so it trusts only what this user
made: cache folders are created private (mode 0700), and a folder or entry
that is owned by another user, is writable by group or others, or is not a
plain folder/file is ignored -- a miss, never read, written or deleted --
with one `CacheWarning` per folder or entry.  The checks are made on the open
file (`fstat`), so a swapped file cannot slip in between check and read.
"""

from __future__ import annotations

import _thread
import json
import os
from collections import OrderedDict
from typing import Any

from ironaccel.diskcache import CacheWarning, DiskCache, sha256  # noqa: F401  (sha256: program.py uses it)

__all__ = [
    "ENV_CACHE",
    "ENV_CACHE_DIR",
    "cache_enabled",
    "cache_dir",
    "cache_key",
    "memory_get",
    "memory_put",
    "disk_get",
    "disk_put",
    "clear_memory",
    "entry_path",
    "fast_get",
    "fast_put",
    "read_json",
    "write_atomic",
    "CacheWarning",
    "trusted_folder",
]

ENV_CACHE = "IRONACCEL_CUDA_CACHE"
ENV_CACHE_DIR = "IRONACCEL_CUDA_CACHE_DIR"
FORMAT = 1
MAGIC = b"IACUDA\x01\n"
MEMORY_ENTRIES = 512
#: The disk part: core's trusted cache (ironaccel.diskcache), the one implementation of these rules.
_DISK = DiskCache("cuda", magic=MAGIC, env_off=ENV_CACHE, env_dir=ENV_CACHE_DIR, fmt=FORMAT)
_warned = _DISK._warned  # the paths warned about (tests clear it)

_memory: OrderedDict[str, Any] = OrderedDict()
_memory_lock = _thread.allocate_lock()
_fast: dict[Any, Any] = {}  # inputs as given -> ObjectCode marked "memory"


def cache_enabled() -> bool:
    return _DISK.enabled()


def cache_dir() -> str:
    return _DISK.folder()


def trusted_folder(folder: str, create: bool = False) -> bool:
    """True if `folder` is this user's and private enough to read and write the cache in (made 0700 if asked)."""
    return _DISK.trusted_folder(folder, create)


def cache_key(**parts: Any) -> str:
    """A hex SHA-256 over a canonical JSON of `parts` (plus the cache format)."""
    return _DISK.key(**parts)


# -- memory -------------------------------------------------------------------


def memory_get(key: str) -> Any:
    with _memory_lock:
        value = _memory.get(key)
        if value is not None:
            _memory.move_to_end(key)
        return value


def memory_put(key: str, value: Any) -> None:
    with _memory_lock:
        _memory[key] = value
        _memory.move_to_end(key)
        while len(_memory) > MEMORY_ENTRIES:
            _memory.popitem(last=False)


def fast_get(key: Any) -> Any:
    """The ObjectCode (marked "memory") compiled from exactly these inputs in this process, or None."""
    return _fast.get(key)


def fast_put(key: Any, value: Any) -> None:
    with _memory_lock:
        if len(_fast) >= MEMORY_ENTRIES:
            _fast.pop(next(iter(_fast)))
        _fast[key] = value


def clear_memory() -> None:
    """Forget every in-memory entry (the disk cache is untouched)."""
    with _memory_lock:
        _memory.clear()
        _fast.clear()


# -- disk ---------------------------------------------------------------------


def entry_path(key: str, folder: str | None = None) -> str:
    return os.path.join(folder or cache_dir(), f"{key}.bin")


def encode(key: str, meta: dict[str, Any], payload: bytes) -> bytes:
    return _DISK.encode(key, meta, payload)


def decode(key: str, blob: bytes) -> tuple[dict[str, Any], bytes] | None:
    """(meta, payload), or None if `blob` is not a sound entry for `key`."""
    return _DISK.decode(key, blob)


def disk_get(key: str) -> tuple[dict[str, Any], bytes] | None:
    return _DISK.get(key)


def write_atomic(name: str, data: bytes) -> str | None:
    """Write `data` to cache_dir()/name through a temporary file and a rename; None if that fails."""
    return _DISK.write_atomic(name, data)


def read_json(name: str) -> Any:
    """The JSON document cache_dir()/name, or None if it is missing or unreadable."""
    blob = _DISK.read(name)
    if blob is None:
        return None
    try:
        return json.loads(blob)
    except ValueError:
        return None


def disk_put(key: str, meta: dict[str, Any], payload: bytes) -> str | None:
    """Write an entry atomically; None if the folder cannot be written."""
    return _DISK.put(key, meta, payload)
