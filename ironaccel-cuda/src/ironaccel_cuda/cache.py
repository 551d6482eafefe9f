"""The compiled-program cache: in memory, then on disk.

Keyed on everything that changes the output: the source, the header
sources, the name expressions, the NVRTC option list, the target kind
(ptx/cubin), the architecture and the NVRTC version (see `cache_key`).

Environment, read at every lookup:

* ``IRONACCEL_CUDA_CACHE=0`` turns both caches off.
* ``IRONACCEL_CUDA_CACHE_DIR=/path`` moves the disk cache (default
  ``$XDG_CACHE_HOME/ironaccel/cuda`` or ``~/.cache/ironaccel/cuda``).

Disk entries are written to a temporary file in the cache folder and renamed
into place, so readers never see a partial file.  Each entry carries a magic,
its own key and a SHA-256 of its contents; an entry that fails any check
(corrupt, truncated, foreign) is a miss, is deleted, and is rewritten after
the recompile.  A cache folder that cannot be written is skipped silently.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

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
]

ENV_CACHE = "IRONACCEL_CUDA_CACHE"
ENV_CACHE_DIR = "IRONACCEL_CUDA_CACHE_DIR"
FORMAT = 1
MAGIC = b"IACUDA\x01\n"
_HEADER = struct.Struct("<8s32sQ")  # magic, sha256(meta + payload), len(meta)
MEMORY_ENTRIES = 512

_memory: OrderedDict[str, Any] = OrderedDict()
_memory_lock = threading.Lock()


def cache_enabled() -> bool:
    return os.environ.get(ENV_CACHE, "1").strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    explicit = os.environ.get(ENV_CACHE_DIR)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ironaccel" / "cuda"


def cache_key(**parts: Any) -> str:
    """A hex SHA-256 over a canonical JSON of `parts` (plus the cache format)."""
    blob = json.dumps({"format": FORMAT, **parts}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


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


def clear_memory() -> None:
    """Forget every in-memory entry (the disk cache is untouched)."""
    with _memory_lock:
        _memory.clear()


# -- disk ---------------------------------------------------------------------


def entry_path(key: str, folder: Path | None = None) -> Path:
    return (folder or cache_dir()) / f"{key}.bin"


def encode(key: str, meta: dict[str, Any], payload: bytes) -> bytes:
    meta_bytes = json.dumps({"key": key, **meta}, sort_keys=True).encode()
    digest = hashlib.sha256(meta_bytes + payload).digest()
    return _HEADER.pack(MAGIC, digest, len(meta_bytes)) + meta_bytes + payload


def decode(key: str, blob: bytes) -> tuple[dict[str, Any], bytes] | None:
    """(meta, payload), or None if `blob` is not a sound entry for `key`."""
    if len(blob) < _HEADER.size:
        return None
    magic, digest, meta_len = _HEADER.unpack_from(blob)
    if magic != MAGIC or _HEADER.size + meta_len > len(blob):
        return None
    body = blob[_HEADER.size:]
    if hashlib.sha256(body).digest() != digest:
        return None
    try:
        meta = json.loads(body[:meta_len])
    except ValueError:
        return None
    if not isinstance(meta, dict) or meta.get("key") != key:
        return None
    return meta, body[meta_len:]


def disk_get(key: str) -> tuple[dict[str, Any], bytes] | None:
    path = entry_path(key)
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    entry = decode(key, blob)
    if entry is None:
        try:
            path.unlink()
        except OSError:
            pass
    return entry


def disk_put(key: str, meta: dict[str, Any], payload: bytes) -> Path | None:
    """Write an entry atomically; None if the folder cannot be written."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".bin", dir=folder)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(encode(key, meta, payload))
        final = entry_path(key, folder)
        os.replace(tmp, final)
        return final
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return None
