"""A compile cache on disk that trusts only what this user wrote: ironaccel-cuda's NVRTC cache and Slang's.

`DiskCache(name, magic=..., env_off=..., env_dir=...)` keeps entries under
``$XDG_CACHE_HOME/ironaccel/<name>`` (or ``~/.cache/ironaccel/<name>``, or the
folder in `env_dir`); ``<env_off>=0`` turns it off (`enabled()`, which the
caller asks).  What it returns may run on a GPU, so:

* folders are created private (0700); a folder or entry owned by another user,
  writable by group or others, or not a plain folder/file is ignored -- a miss,
  never read, written or deleted -- with one `CacheWarning` per path.  The
  checks are made on the open file (`fstat`), so a file swapped in between
  check and read is not read;
* each entry carries a magic, its own key and a SHA-256 of its contents: an
  entry that fails any check (corrupt, truncated, another key's) is a miss, is
  deleted and is rewritten after the recompile;
* entries are written to a temporary file and renamed into place, so readers
  never see a partial one; a folder that cannot be written is skipped silently.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from typing import Any

__all__ = ["DiskCache", "CacheWarning", "untrusted", "sha256"]


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

_HEADER = struct.Struct("<8s32sQ")  # magic, sha256(meta + payload), len(meta)


class CacheWarning(UserWarning):
    """A cache folder or entry was ignored because another user could have written it."""


def untrusted(st: os.stat_result, folder: bool) -> str | None:
    """Why a file or folder with this status must not be trusted, or None."""
    what = "folder" if folder else "entry"
    if folder and not stat.S_ISDIR(st.st_mode):
        return "folder, which is not a folder"
    if not folder and not stat.S_ISREG(st.st_mode):
        return "entry, which is not a regular file"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"{what} owned by another user (uid {st.st_uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{what} writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


class DiskCache:
    """Entries (JSON meta + bytes payload) by hex key in one private folder; see the module docstring."""

    def __init__(self, name: str, *, magic: bytes, env_off: str, env_dir: str, fmt: int = 1):
        if len(magic) != 8:
            raise ValueError("magic must be 8 bytes")
        self.name, self.magic, self.env_off, self.env_dir, self.fmt = name, magic, env_off, env_dir, fmt
        self._warned: set[str] = set()

    def enabled(self) -> bool:
        return os.environ.get(self.env_off, "1").strip().lower() not in ("0", "false", "no", "off")

    def folder(self) -> str:
        explicit = os.environ.get(self.env_dir)
        if explicit:
            return explicit
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "ironaccel", self.name)

    def key(self, **parts: Any) -> str:
        """A hex SHA-256 over a canonical JSON of `parts` (and the cache format)."""
        blob = json.dumps({"format": self.fmt, **parts}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return str(sha256(blob.encode()).hexdigest())

    def _warn(self, path: str, why: str) -> None:
        if path not in self._warned:
            self._warned.add(path)
            import warnings

            warnings.warn(f"ironaccel ignores the {self.name} compile cache {why}: {path}; only folders and entries "
                          f"that are yours and writable by you alone are used (chmod 700 the folder, or move it "
                          f"with {self.env_dir})", CacheWarning, stacklevel=4)

    def trusted_folder(self, folder: str, create: bool = False) -> bool:
        """True if `folder` is this user's and private enough to use (made 0700 if asked)."""
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
        why = untrusted(st, folder=True)
        if why is not None:
            self._warn(folder, why)
            return False
        return True

    def read_path(self, path: str) -> bytes | None:
        """The contents of file `path` if it is a trusted entry in a trusted folder, else None."""
        if not self.trusted_folder(os.path.dirname(path)):
            return None
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            why = untrusted(os.fstat(fd), folder=False)
            if why is not None:
                self._warn(path, why)
                return None
            with os.fdopen(fd, "rb", closefd=False) as f:
                return f.read()
        except OSError:
            return None
        finally:
            os.close(fd)

    def read(self, name: str) -> bytes | None:
        """The trusted file `name` of the cache folder, or None."""
        return self.read_path(os.path.join(self.folder(), name))

    def path(self, key: str) -> str:
        return os.path.join(self.folder(), f"{key}.bin")

    def encode(self, key: str, meta: dict[str, Any], payload: bytes) -> bytes:
        meta_bytes = json.dumps({"key": key, **meta}, sort_keys=True).encode()
        digest = sha256(meta_bytes + payload).digest()
        return _HEADER.pack(self.magic, digest, len(meta_bytes)) + meta_bytes + payload

    def decode(self, key: str, blob: bytes) -> tuple[dict[str, Any], bytes] | None:
        """(meta, payload), or None if `blob` is not a sound entry for `key`."""
        if len(blob) < _HEADER.size:
            return None
        magic, digest, meta_len = _HEADER.unpack_from(blob)
        if magic != self.magic or _HEADER.size + meta_len > len(blob):
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

    def get(self, key: str) -> tuple[dict[str, Any], bytes] | None:
        """The entry for `key` if the folder holds a sound, trusted one (a corrupt one is deleted)."""
        path = self.path(key)
        blob = self.read_path(path)
        if blob is None:
            return None
        entry = self.decode(key, blob)
        if entry is None:
            try:
                os.unlink(path)
            except OSError:
                pass
        return entry

    def put(self, key: str, meta: dict[str, Any], payload: bytes) -> str | None:
        """Write an entry atomically; its path, or None if the folder cannot be written."""
        return self.write_atomic(f"{key}.bin", self.encode(key, meta, payload))

    def write_atomic(self, name: str, data: bytes) -> str | None:
        """Write `data` to the cache folder's `name` through a temporary file and a rename; None if that fails."""
        import tempfile

        folder = self.folder()
        if not self.trusted_folder(folder, create=True):
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
