"""The committed SPIR-V matches its GLSL source (the GPU machine has no compiler, so .spv files are committed)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parent / "kernels"
MANIFEST = json.loads((KERNELS / "manifest.json").read_text())
SOURCES = sorted(MANIFEST["kernels"])


def test_every_source_is_in_the_manifest() -> None:
    assert sorted(p.name for p in KERNELS.glob("*.comp")) == SOURCES


@pytest.mark.parametrize("source", SOURCES)
def test_spv_is_built_from_the_current_source(source: str) -> None:
    entry = MANIFEST["kernels"][source]
    assert hashlib.sha256((KERNELS / source).read_bytes()).hexdigest() == entry["source_sha256"], \
        f"{source} changed since its .spv was built: run python {KERNELS / 'build.py'}"
    assert hashlib.sha256((KERNELS / entry["spv"]).read_bytes()).hexdigest() == entry["spv_sha256"]


@pytest.mark.parametrize("source", SOURCES)
def test_recompiling_gives_the_committed_spv(source: str, tmp_path: Path) -> None:
    if shutil.which("glslangValidator") is None:
        pytest.skip("glslangValidator is not installed")
    version = subprocess.run(["glslangValidator", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    if version.strip() != MANIFEST["glslang"]:
        pytest.skip(f"glslang {version!r} differs from the one that built the .spv ({MANIFEST['glslang']!r})")
    out = tmp_path / "out.spv"
    subprocess.run(["glslangValidator", "-V", "--target-env", MANIFEST["target_env"], "-o", str(out),
                    str(KERNELS / source)], check=True, capture_output=True)
    assert out.read_bytes() == (KERNELS / MANIFEST["kernels"][source]["spv"]).read_bytes()


@pytest.mark.parametrize("source", SOURCES)
def test_committed_spv_passes_spirv_val(source: str) -> None:
    if shutil.which("spirv-val") is None:
        pytest.skip("spirv-val is not installed")
    spv = KERNELS / MANIFEST["kernels"][source]["spv"]
    subprocess.run(["spirv-val", "--target-env", MANIFEST["target_env"], str(spv)], check=True)
