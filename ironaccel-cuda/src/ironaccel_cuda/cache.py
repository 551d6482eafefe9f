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
"""

from __future__ import annotations

import _thread
import json
import os
import struct
from collections import OrderedDict
from typing import Any


def _sha256_type() -> Any:
    """sha256 without importing hashlib, which loads OpenSSL (milliseconds in a fresh process)."""
    import sys

    name = "_sha2" if sys.version_info >= (3, 12) else "_sha256"  # CPython's own implementation
    try:
        return __import__(name).sha256
    except (ImportError, AttributeError):
        pass
    from hashlib import sha256

    return sha256


sha256 = _sha256_type()

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
]

ENV_CACHE = "IRONACCEL_CUDA_CACHE"
ENV_CACHE_DIR = "IRONACCEL_CUDA_CACHE_DIR"
FORMAT = 1
MAGIC = b"IACUDA\x01\n"
_HEADER = struct.Struct("<8s32sQ")  # magic, sha256(meta + payload), len(meta)
MEMORY_ENTRIES = 512

_memory: OrderedDict[str, Any] = OrderedDict()
_memory_lock = _thread.allocate_lock()
_fast: dict[Any, Any] = {}  # inputs as given -> ObjectCode marked "memory"


def cache_enabled() -> bool:
    return os.environ.get(ENV_CACHE, "1").strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> str:
    explicit = os.environ.get(ENV_CACHE_DIR)
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ironaccel", "cuda")


def cache_key(**parts: Any) -> str:
    """A hex SHA-256 over a canonical JSON of `parts` (plus the cache format)."""
    blob = json.dumps({"format": FORMAT, **parts}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return sha256(blob.encode()).hexdigest()


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
    meta_bytes = json.dumps({"key": key, **meta}, sort_keys=True).encode()
    digest = sha256(meta_bytes + payload).digest()
    return _HEADER.pack(MAGIC, digest, len(meta_bytes)) + meta_bytes + payload


def decode(key: str, blob: bytes) -> tuple[dict[str, Any], bytes] | None:
    """(meta, payload), or None if `blob` is not a sound entry for `key`."""
    if len(blob) < _HEADER.size:
        return None
    magic, digest, meta_len = _HEADER.unpack_from(blob)
    if magic != MAGIC or _HEADER.size + meta_len > len(blob):
        return None
    body = blob[_HEADER.size:]
    if sha256(body).digest() != digest:
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
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        return None
    entry = decode(key, blob)
    if entry is None:
        try:
            os.unlink(path)
        except OSError:
            pass
    return entry


def write_atomic(name: str, data: bytes) -> str | None:
    """Write `data` to cache_dir()/name through a temporary file and a rename; None if that fails."""
    import tempfile

    folder = cache_dir()
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.splitext(name)[1], dir=folder)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        final = os.path.join(folder, name)
        os.replace(tmp, final)
        return final
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return None


def read_json(name: str) -> Any:
    """The JSON document cache_dir()/name, or None if it is missing or unreadable."""
    try:
        with open(os.path.join(cache_dir(), name), "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def disk_put(key: str, meta: dict[str, Any], payload: bytes) -> str | None:
    """Write an entry atomically; None if the folder cannot be written."""
    return write_atomic(f"{key}.bin", encode(key, meta, payload))
