"""ironaccel.diskcache: the trusted compile cache on disk (used by ironaccel-cuda's NVRTC cache and ironaccel-slang)."""

from __future__ import annotations

import os
import warnings

import pytest

from ironaccel.diskcache import CacheWarning, DiskCache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IRONACCEL_TEST_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("IRONACCEL_TEST_CACHE", raising=False)
    return DiskCache("test", magic=b"IATEST\x01\n", env_off="IRONACCEL_TEST_CACHE", env_dir="IRONACCEL_TEST_CACHE_DIR")


def test_round_trip_in_a_private_folder(cache, tmp_path):
    key = cache.key(source="x", target="y")
    assert key == cache.key(target="y", source="x") != cache.key(source="x", target="z")
    assert cache.get(key) is None
    path = cache.put(key, {"kind": "ptx"}, b"payload")
    assert path is not None and os.stat(tmp_path / "c").st_mode & 0o777 == 0o700
    assert cache.get(key) == ({"key": key, "kind": "ptx"}, b"payload")
    assert cache.get(cache.key(source="other")) is None


def test_corrupt_and_foreign_entries_are_misses_and_deleted(cache):
    key = cache.key(n=1)
    path = cache.put(key, {}, b"payload")
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        f.write(b"X")
    assert cache.get(key) is None and not os.path.exists(path)
    path = cache.put(key, {}, b"payload")
    other = cache.key(n=2)
    os.replace(path, cache.path(other))  # a sound entry, but for another key
    assert cache.get(other) is None


def test_entries_and_folders_others_could_write_are_ignored_with_one_warning(cache, tmp_path):
    key = cache.key(n=3)
    path = cache.put(key, {}, b"payload")
    os.chmod(path, 0o666)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert cache.get(key) is None and cache.get(key) is None
    assert len([w for w in seen if issubclass(w.category, CacheWarning)]) == 1
    assert os.path.exists(path)  # never deleted: it is not ours to touch
    os.chmod(path, 0o600)
    os.chmod(tmp_path / "c", 0o777)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert cache.get(key) is None and cache.put(key, {}, b"new") is None
        assert any("writable by group or others" in str(w.message) for w in seen)
    finally:
        os.chmod(tmp_path / "c", 0o700)


def test_the_switch_is_read_from_the_environment(cache, monkeypatch):
    assert cache.enabled()
    monkeypatch.setenv("IRONACCEL_TEST_CACHE", "0")
    assert not cache.enabled()
