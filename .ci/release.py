#!/usr/bin/env python3
"""The release's one version and the metadata every distribution ships, checked and bumped in one place.

    python3 .ci/release.py check        every pyproject and __init__ carries VERSION, full metadata, the LICENSE
    python3 .ci/release.py bump 0.3.0   write a new version into VERSION, every pyproject.toml and __init__.py
    python3 .ci/release.py version      print VERSION

Why a VERSION file plus this script, not setuptools' dynamic version: a distribution's sdist holds only its own
folder, so a pyproject cannot read a file above it once built from the sdist; and the GPU machine imports the
tree from PYTHONPATH without installing it, so `__version__` cannot come from installed metadata.  The literal
stays in each pyproject and `__init__`, VERSION is the one place a person edits (`bump`), and `check` (run by
CI through .ci/test_release.py) fails when any copy disagrees.
Standard library only.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
VERSION_FILE = ROOT / "VERSION"
REPO_URL = "https://github.com/ironaccel/ironaccel"
PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")
REQUIRED_URLS = ("Homepage", "Documentation", "Repository", "Issues", "Changelog")
VERSION_RE = re.compile(r'^(__version__\s*=\s*")([^"]+)(")', re.MULTILINE)
PYPROJECT_RE = re.compile(r'^(version\s*=\s*")([^"]+)(")', re.MULTILINE)


def version() -> str:
    return VERSION_FILE.read_text().strip()


def dists() -> list[Path]:
    return sorted(p for p in ROOT.glob("ironaccel-*") if (p / "pyproject.toml").is_file())


def init_file(dist: Path) -> Path:
    name = dist.name.removeprefix("ironaccel-")
    package = "ironaccel" if name == "core" else f"ironaccel_{name.replace('-', '_')}"
    return dist / "src" / package / "__init__.py"


def problems() -> list[str]:
    """Everything that disagrees with VERSION or lacks the release metadata, one line each."""
    want = version()
    out: list[str] = []
    if not re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", want):
        out.append(f"VERSION {want!r} is not a release version (X.Y.Z, or with aN/bN/rcN)")
    license_text = (ROOT / "LICENSE").read_text()
    if "Apache License" not in license_text or "Version 2.0" not in license_text:
        out.append("LICENSE is not the Apache License 2.0")
    changelog = (ROOT / "CHANGELOG.md").read_text() if (ROOT / "CHANGELOG.md").is_file() else ""
    if f"## [{want}]" not in changelog:
        out.append(f"CHANGELOG.md has no '## [{want}]' section")
    for dist in dists():
        project = tomllib.loads((dist / "pyproject.toml").read_text())["project"]
        where = f"{dist.name}/pyproject.toml"
        if project.get("version") != want:
            out.append(f"{where}: version {project.get('version')!r}, VERSION says {want!r}")
        if project.get("license") != "Apache-2.0":
            out.append(f"{where}: license must be the SPDX expression 'Apache-2.0'")
        if project.get("license-files") != ["LICENSE"]:
            out.append(f"{where}: license-files must be ['LICENSE']")
        if not (dist / "LICENSE").is_file() or (dist / "LICENSE").read_text() != license_text:
            out.append(f"{dist.name}/LICENSE missing or not the repository's LICENSE")
        if project.get("readme") != "README.md" or not (dist / "README.md").is_file():
            out.append(f"{where}: readme must be README.md, and the file must exist")
        urls = project.get("urls", {})
        out += [f"{where}: no project URL {key!r}" for key in REQUIRED_URLS if key not in urls]
        classifiers = project.get("classifiers", [])
        out += [f"{where}: no classifier for Python {py}" for py in PYTHONS
                if f"Programming Language :: Python :: {py}" not in classifiers]
        if "Typing :: Typed" not in classifiers:
            out.append(f"{where}: no 'Typing :: Typed' classifier")
        for dep in project.get("dependencies", []):
            for peer in ("ironaccel-core", "ironaccel-cuda"):  # a peer distribution of this repository
                if re.match(rf"{peer}\b(?!-)", dep) and dep != f"{peer}>={'.'.join(want.split('.')[:2])}":
                    out.append(f"{where}: {dep!r} must ask for the {peer} of this minor release")
        init = init_file(dist)
        found = VERSION_RE.search(init.read_text()) if init.is_file() else None
        if found is None or found.group(2) != want:
            out.append(f"{init.relative_to(ROOT)}: __version__ {found and found.group(2)!r}, VERSION says {want!r}")
    return out


def bump(new: str) -> None:
    """Write `new` into VERSION, every pyproject's version and core pin, and every __version__."""
    minor = ".".join(new.split(".")[:2])
    VERSION_FILE.write_text(new + "\n")
    for dist in dists():
        pyproject = dist / "pyproject.toml"
        text = PYPROJECT_RE.sub(lambda m: m.group(1) + new + m.group(3), pyproject.read_text(), count=1)
        text = re.sub(r'"ironaccel-(core|cuda)>=[0-9.]+"', lambda m: f'"ironaccel-{m.group(1)}>={minor}"', text)
        pyproject.write_text(text)
        init = init_file(dist)
        init.write_text(VERSION_RE.sub(lambda m: m.group(1) + new + m.group(3), init.read_text(), count=1))


def main(argv: list[str]) -> int:
    if argv[:1] == ["version"]:
        print(version())
        return 0
    if argv[:1] == ["bump"] and len(argv) == 2:
        bump(argv[1])
        print(f"bumped to {argv[1]}; add its CHANGELOG.md section, then: python3 .ci/release.py check")
        return 0
    if argv[:1] == ["check"]:
        found = problems()
        print("\n".join(found) if found else f"release metadata consistent: {version()}, {len(dists())} distributions")
        return 1 if found else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
