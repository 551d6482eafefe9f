"""Compile the test kernels to SPIR-V and record what was compiled with what.

    python ironaccel-vulkan/tests/kernels/build.py

The .spv files are committed because the GPU machine has no glslangValidator;
manifest.json holds each source's sha256 and the glslang version, so the tests
can tell a stale .spv (source edited, not rebuilt) from a different compiler.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET_ENV = "vulkan1.0"  # the widest: runs on every Vulkan driver


def glslang_version() -> str:
    out = subprocess.run(["glslangValidator", "--version"], capture_output=True, text=True, check=True).stdout
    return out.splitlines()[0].strip()


def compile_kernel(source: Path, output: Path) -> None:
    subprocess.run(
        ["glslangValidator", "-V", "--target-env", TARGET_ENV, "-o", str(output), str(source)],
        check=True, capture_output=True, text=True,
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    manifest = {"glslang": glslang_version(), "target_env": TARGET_ENV, "kernels": {}}
    for source in sorted(HERE.glob("*.comp")):
        spv = source.with_suffix(".spv")
        compile_kernel(source, spv)
        manifest["kernels"][source.name] = {"spv": spv.name, "source_sha256": sha256(source), "spv_sha256": sha256(spv)}
        print(f"{source.name} -> {spv.name} ({spv.stat().st_size} bytes)")
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
