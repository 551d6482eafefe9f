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
import stat
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
    "CacheWarning",
    "trusted_folder",
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


class CacheWarning(UserWarning):
    """A cache folder or entry was ignored because another user could have written it."""


_warned: set[str] = set()


def _warn_once(path: str, why: str) -> None:
    if path in _warned:
        return
    _warned.add(path)
    import warnings

    warnings.warn(f"ironaccel-cuda ignores the compile cache {why}: {path}; only folders and entries that are "
                  f"yours and writable by you alone are used (chmod 700 the folder, or move it with "
                  f"{ENV_CACHE_DIR})", CacheWarning, stacklevel=4)


def _untrusted(st: os.stat_result, folder: bool) -> str | None:
    """Why a file or folder with this status must not be trusted, or None."""
    if folder and not stat.S_ISDIR(st.st_mode):
        return "folder, which is not a folder"
    if not folder and not stat.S_ISREG(st.st_mode):
        return "entry, which is not a regular file"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"{'folder' if folder else 'entry'} owned by another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{'folder' if folder else 'entry'} writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def trusted_folder(folder: str, create: bool = False) -> bool:
    """True if `folder` is this user's and private enough to read and write the cache in (made 0700 if asked)."""
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        if not create:
            return False
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            st = os.stat(folder)
        except OSError:
            return False
    except OSError:
        return False
    why = _untrusted(st, folder=True)
    if why is not None:
        _warn_once(folder, why)
        return False
    return True


def _read_trusted(path: str) -> bytes | None:
    """The contents of cache file `path` if it is a trusted entry in a trusted folder, else None."""
    if not trusted_folder(os.path.dirname(path)):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        why = _untrusted(os.fstat(fd), folder=False)
        if why is not None:
            _warn_once(path, why)
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    except OSError:
        return None
    finally:
        os.close(fd)


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
    blob = _read_trusted(path)
    if blob is None:
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
    if not trusted_folder(folder, create=True):
        return None
    try:
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
    blob = _read_trusted(os.path.join(cache_dir(), name))
    if blob is None:
        return None
    try:
        return json.loads(blob)
    except ValueError:
        return None


def disk_put(key: str, meta: dict[str, Any], payload: bytes) -> str | None:
    """Write an entry atomically; None if the folder cannot be written."""
    return write_atomic(f"{key}.bin", encode(key, meta, payload))
