"""The compiled core as C and as a build: its C unit tests, its declarations against cuda.h, the one
entry-point table, a build that stops early without a compiler or Cython, and an import that loads no driver."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import cbuild

DIST = Path(__file__).resolve().parents[2]
NATIVE = DIST / "native"
C_SOURCES = [NATIVE / n for n in ("driver.c", "pinned.c", "staging.c", "fence.c", "hostmem.c")]
STRICT = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pthread"]


def _cc() -> str:
    cc = cbuild.compiler()
    if cc is None:
        pytest.skip("no C compiler")
    return cc


def _sanitizers(cc: str, tmp_path: Path) -> list[str]:
    """-fsanitize=address,undefined where the compiler and its runtime have them."""
    probe = tmp_path / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    done = subprocess.run([cc, *flags, str(probe), "-o", str(tmp_path / "probe")], capture_output=True)
    return flags if done.returncode == 0 else []


def test_native_c_unit_tests(tmp_path):
    cc = _cc()
    exe = tmp_path / "test_native"
    flags = _sanitizers(cc, tmp_path)
    subprocess.run([cc, "-O1", "-g", *STRICT, *flags, f"-I{NATIVE}", str(DIST / "tests" / "native" / "test_native.c"),
                    *map(str, C_SOURCES), "-o", str(exe)], check=True, capture_output=True, text=True)
    # ASan must be the first library loaded: a preload (the GPU machine preloads NVIDIA's TLS library for its
    # Vulkan driver) would stop the sanitized program at start, so this C program runs without it.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "native tests passed" in out.stdout


def test_declarations_match_cuda_h(tmp_path):
    cc = _cc()
    include = cbuild.cuda_include()
    if include is None:
        pytest.skip("no cuda.h (a CUDA toolkit or NVIDIA's pip headers) here")
    check = DIST / "tests" / "native" / "check_headers.c"
    out = subprocess.run([cc, *STRICT, f"-I{include}", f"-I{NATIVE}", str(check), "-o", str(tmp_path / "check")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-4000:]


def test_the_c_compiles_alone_with_warnings_as_errors(tmp_path):
    cc = _cc()
    for source in C_SOURCES:
        subprocess.run([cc, "-c", "-O2", *STRICT, "-fPIC", f"-I{NATIVE}", str(source), "-o",
                        str(tmp_path / (source.stem + ".o"))], check=True)


def test_one_entry_point_table():
    sys.path.insert(0, str(NATIVE))
    try:
        import gen_entry_points
    finally:
        sys.path.remove(str(NATIVE))
    from ironaccel_cuda import _core

    table = [(name, abi) for name, abi, _kind, _params in gen_entry_points.entries(gen_entry_points.HEADER.read_text())]
    assert list(_core.ENTRY_POINTS) == table
    assert subprocess.run([sys.executable, str(NATIVE / "gen_entry_points.py"), "--check"]).returncode == 0


def _run(code: str, **env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         env=dict(os.environ, **env), timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_loads_no_driver():
    got = _run("""
        import json, sys
        import ironaccel_cuda as cu
        from ironaccel_cuda import _core
        cu.LaunchConfig(cluster=2)
        maps = open("/proc/self/maps").read() if sys.platform == "linux" else ""
        print(json.dumps({"libcuda": "libcuda.so" in maps, "core": _core.__file__.endswith(".so")}))
    """)
    assert got == {"libcuda": False, "core": True}


def _copy_sources(dest: Path) -> Path:
    root = dest / "ironaccel-cuda"
    root.mkdir(parents=True)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy2(DIST / name, root / name)
    shutil.copytree(DIST / "native", root / "native", ignore=shutil.ignore_patterns("_core.c", "_entry_points.pxi"))
    shutil.copytree(DIST / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info"))
    return root


def test_building_without_a_compiler_stops_early_and_says_what_to_install(tmp_path):
    root = _copy_sources(tmp_path)
    done = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=root, capture_output=True,
                          text=True, env=dict(os.environ, CC="/nonexistent/cc"), timeout=120)
    assert done.returncode != 0
    assert "no C compiler" in done.stderr and "install" in done.stderr
    assert not list((root / "src" / "ironaccel_cuda").glob("_core*.so"))


def test_building_without_cython_stops_early_and_says_what_to_install(tmp_path):
    root = _copy_sources(tmp_path)
    code = "import sys; sys.modules['Cython'] = None; sys.argv = ['setup.py', 'build_ext', '--inplace']; " \
           "import runpy; runpy.run_path('setup.py', run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Cython 3 is needed" in done.stderr
