"""cuda.core's program caches: `InMemoryProgramCache`, `FileStreamProgramCache` and their key.

`Program.compile(..., cache=c)` stores the compiled bytes under
`make_program_cache_key(...)` (in `_keys`, with the version probes it mixes in).  (ironaccel's
own `Program` also caches, in memory and on disk, whatever cuda.core caching is asked for;
these are cuda.core's explicit ones.)
"""

from __future__ import annotations

import abc
import hashlib
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from . import _keys  # noqa: F401  (cuda.core has `utils._program_cache._keys`; tests stand in its probes)
from ._keys import make_program_cache_key

__all__ = ["FileStreamProgramCache", "InMemoryProgramCache", "ProgramCacheResource", "make_program_cache_key"]



def _as_key_bytes(key: object) -> bytes:
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode()
    raise TypeError(f"cache keys are bytes or str, got {type(key).__name__}")


def _extract_bytes(value: object) -> bytes:
    from ..._module import ObjectCode

    if isinstance(value, ObjectCode):
        code = value.code
        if isinstance(code, str):
            try:
                return Path(code).read_bytes()
            except FileNotFoundError as exc:
                raise FileNotFoundError(f"cannot store a path-backed ObjectCode in the program cache: its file {code} "
                                        "is gone") from exc
        return bytes(code)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"cache values are bytes-like or ObjectCode, got {type(value).__name__}")


class ProgramCacheResource(abc.ABC):
    """A mapping from cache keys (bytes or str) to compiled code (bytes)."""

    @abc.abstractmethod
    def __getitem__(self, key: bytes | str) -> bytes: ...

    @abc.abstractmethod
    def __setitem__(self, key: bytes | str, value: Any) -> None: ...

    @abc.abstractmethod
    def __delitem__(self, key: bytes | str) -> None: ...

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def clear(self) -> None: ...

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def get(self, key: bytes | str, default: bytes | None = None) -> bytes | None:
        try:
            return self[key]
        except KeyError:
            return default

    def update(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]], /) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        for key, value in pairs:
            self[key] = value

    def close(self) -> None:  # noqa: B027 (a default that does nothing, as in cuda.core)
        """Release what the cache holds open (nothing, for these two)."""

    def __enter__(self) -> ProgramCacheResource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InMemoryProgramCache(ProgramCacheResource):
    """A least-recently-used cache in this process (at most `max_size_bytes` of values when given)."""

    def __init__(self, *, max_size_bytes: int | None = None) -> None:
        if max_size_bytes is not None and max_size_bytes <= 0:
            raise ValueError(f"max_size_bytes must be positive or None, got {max_size_bytes}")
        self._max = max_size_bytes
        self._items: OrderedDict[bytes, bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def __getitem__(self, key: object) -> bytes:
        k = _as_key_bytes(key)
        with self._lock:
            value = self._items[k]
            self._items.move_to_end(k)
            return value

    def __setitem__(self, key: object, value: Any) -> None:
        k, data = _as_key_bytes(key), _extract_bytes(value)
        with self._lock:
            old = self._items.pop(k, None)
            if old is not None:
                self._size -= len(old)
            self._items[k] = data
            self._size += len(data)
            self._evict_to_caps()

    def __delitem__(self, key: object) -> None:
        with self._lock:
            self._size -= len(self._items.pop(_as_key_bytes(key)))

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._size = 0

    def _evict_to_caps(self) -> None:
        while self._max is not None and self._size > self._max and self._items:
            _, value = self._items.popitem(last=False)
            self._size -= len(value)


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cuda-python" / "program-cache"


def _unlink_if_unchanged(path: Path, seen: os.stat_result) -> None:
    """Remove `path` unless another writer replaced it since `seen` was taken (a fresh entry survives a clear)."""
    try:
        now = path.stat()
    except FileNotFoundError:
        return
    if (now.st_ino, now.st_mtime_ns, now.st_size) != (seen.st_ino, seen.st_mtime_ns, seen.st_size):
        return
    try:
        path.unlink()
    except FileNotFoundError:
        pass


class FileStreamProgramCache(ProgramCacheResource):
    """A cache in a folder: one file per entry, written atomically; least recently used out past `max_size_bytes`."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, max_size_bytes: int | None = None) -> None:
        if max_size_bytes is not None and max_size_bytes <= 0:
            raise ValueError(f"max_size_bytes must be positive or None, got {max_size_bytes}")
        self._root = Path(path) if path is not None else _default_cache_dir()
        self._entries = self._root / "entries"
        self._tmp = self._root / "tmp"
        self._entries.mkdir(parents=True, exist_ok=True)
        self._tmp.mkdir(parents=True, exist_ok=True)
        self._max = max_size_bytes

    def _path_for_key(self, key: object) -> Path:
        digest = hashlib.sha256(_as_key_bytes(key)).hexdigest()
        return self._entries / digest[:2] / digest

    def __getitem__(self, key: object) -> bytes:
        path = self._path_for_key(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise KeyError(key) from None
        try:
            os.utime(path)
        except OSError:
            pass
        return data

    def __setitem__(self, key: object, value: Any) -> None:
        data = _extract_bytes(value)
        path = self._path_for_key(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp.mkdir(parents=True, exist_ok=True)  # someone may have cleared the folder by hand
        fd, tmp = tempfile.mkstemp(dir=self._tmp)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._enforce_size_cap()

    def __delitem__(self, key: object) -> None:
        try:
            self._path_for_key(key).unlink()
        except FileNotFoundError:
            raise KeyError(key) from None

    def _iter_entry_paths(self) -> Iterable[Path]:
        return (p for p in self._entries.glob("*/*") if p.is_file())

    def __len__(self) -> int:
        return sum(1 for _ in self._iter_entry_paths())

    def clear(self) -> None:
        for p, st in self._snapshot():
            _unlink_if_unchanged(p, st)

    def _snapshot(self) -> list[tuple[Path, os.stat_result]]:
        """Every entry with its stat, taken before anything is removed (see `_unlink_if_unchanged`)."""
        entries = []
        for p in self._iter_entry_paths():  # stat as the scan goes: a file replaced after the scan is then spared
            try:
                entries.append((p, p.stat()))
            except FileNotFoundError:
                continue
        return entries

    def _enforce_size_cap(self) -> None:
        if self._max is None:
            return
        entries = sorted(self._snapshot(), key=lambda e: e[1].st_mtime_ns)
        total = sum(st.st_size for _, st in entries)
        for p, st in entries:
            if total <= self._max:
                break
            _unlink_if_unchanged(p, st)
            total -= st.st_size
