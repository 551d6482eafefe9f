"""The optional compiled hot path: it builds from the distribution, is chosen at import, can be turned off,
matches the pure-Python contract name for name, and its absence never breaks an install.

(The behaviour of both hot paths is tested by running the whole GPU suite against the fake driver once per
path: test_fake_driver.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import compiled_build
import pytest

pytest.importorskip("cuda.bindings.driver")


def _run(code: str, **env: str) -> dict:
    full = dict(os.environ, **env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _with_path(path: str | None) -> dict[str, str]:
    if not path:
        return {}
    return {"PYTHONPATH": os.pathsep.join(p for p in (path, os.environ.get("PYTHONPATH")) if p)}


SELECTED = """
    import json, ironaccel_cuda as cu
    from ironaccel_cuda import _hot
    print(json.dumps({"impl": _hot.IMPLEMENTATION, "fast_path": cu.FAST_PATH, "file": _hot.__file__}))
"""


def test_compiled_is_chosen_and_can_be_turned_off(compiled_path):
    env = {**_with_path(compiled_path), "IRONACCEL_CUDA_PURE": "0"}
    got = _run(SELECTED, **env)
    assert got["impl"] == "compiled" and got["fast_path"].startswith("compiled (_hotc")
    if compiled_path:
        assert Path(got["file"]).is_relative_to(compiled_path)
    forced = _run(SELECTED, **{**env, "IRONACCEL_CUDA_PURE": "1"})
    assert forced["impl"] == "python" and forced["fast_path"] == "pure Python (IRONACCEL_CUDA_PURE=1)"


def test_importing_loads_no_driver(compiled_path):
    got = _run("""
        import json, sys
        from ironaccel_cuda import _hot
        maps = open("/proc/self/maps").read() if sys.platform == "linux" else ""
        print(json.dumps({"impl": _hot.IMPLEMENTATION, "libcuda": "libcuda.so" in maps}))
    """, **_with_path(compiled_path), IRONACCEL_CUDA_PURE="0")
    assert got == {"impl": "compiled", "libcuda": False}


def test_same_contract_as_pure_python(compiled_path):
    got = _run("""
        import json, inspect
        from ironaccel_cuda import _hotc, _hotpy
        from ironaccel_cuda.memory import DeviceBufMethods
        missing = [n for n in _hotpy.__all__ if not hasattr(_hotc, n)]
        def public(cls):
            return sorted(n for n in dir(cls) if not n.startswith("_") or n in ("__len__", "__getitem__",
                          "__enter__", "__exit__", "__dlpack__", "__dlpack_device__", "__cuda_array_interface__"))
        called_by_cold_code = {"_make", "_wrap", "_init", "_attach"}
        classes = {}
        for name in ("StreamCore", "EventCore", "DeviceCore", "FunctionCore", "PoolCore"):
            py_cls, c_cls = getattr(_hotpy, name), getattr(_hotc, name)
            wanted = set(public(py_cls)) | set(_hotpy.CORE_FIELDS[name]) | (called_by_cold_code & set(dir(py_cls)))
            classes[name] = sorted(n for n in wanted - {"lock", "take", "give", "give_buf", "min_shift"}
                                   if not hasattr(c_cls, n))
        cold = [n for n in vars(DeviceBufMethods) if not n.startswith("__") or n in ("__getitem__", "__repr__",
                "__enter__", "__exit__", "__len__", "__dlpack__", "__dlpack_device__", "__cuda_array_interface__")]
        buf_missing = sorted(n for n in cold + public(_hotpy.BufCore) if not hasattr(_hotc.DeviceBuf, n))
        print(json.dumps({"missing": missing, "classes": classes, "buf": buf_missing,
                          "fields": _hotc.CORE_FIELDS == {k: tuple(v) for k, v in _hotpy.CORE_FIELDS.items()}}))
    """, **_with_path(compiled_path))
    assert got["missing"] == [], got
    assert {k: v for k, v in got["classes"].items() if v} == {}
    assert got["buf"] == [], got["buf"]
    assert got["fields"], "CORE_FIELDS differ"


def test_install_without_a_compiler_is_pure_python(tmp_path):
    """setup.py never fails the install: no Cython, no compiler, or IRONACCEL_CUDA_PURE_BUILD=1 -> pure Python."""
    src, done = compiled_build.build(tmp_path / "pure", {"IRONACCEL_CUDA_PURE_BUILD": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert not list((src / "ironaccel_cuda").glob("_hotc*.so")) and "IRONACCEL_CUDA_PURE_BUILD" in done.stderr
    got = _run(SELECTED, PYTHONPATH=str(src), IRONACCEL_CUDA_PURE="0", IRONACCEL_CUDA_REQUIRE_COMPILED="0")
    assert got["impl"] == "python" and "not available" in got["fast_path"]
    if compiled_build.toolchain_problem() is None:  # Cython present: make the C compiler fail instead
        src2, done2 = compiled_build.build(tmp_path / "nocc", {"CC": "false", "LDSHARED": "false"})
        assert done2.returncode == 0, done2.stderr[-2000:]
        assert not list((src2 / "ironaccel_cuda").glob("_hotc*.so")) and "failed" in done2.stderr
