"""The release metadata agrees with VERSION everywhere (.ci/release.py check), and bump rewrites every copy."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("ironaccel_release", ROOT / ".ci" / "release.py")
assert spec is not None and spec.loader is not None
release = importlib.util.module_from_spec(spec)
spec.loader.exec_module(release)


def test_every_distribution_carries_the_one_version_license_and_metadata():
    assert release.problems() == []


def test_bump_rewrites_every_copy_and_check_then_wants_a_changelog_section(tmp_path, monkeypatch):
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv*", "dist*", "build", "*.so", "docs"))
    monkeypatch.setattr(release, "ROOT", copy)
    monkeypatch.setattr(release, "VERSION_FILE", copy / "VERSION")
    release.bump("9.8.7")
    found = release.problems()
    assert found == ["CHANGELOG.md has no '## [9.8.7]' section"]
    assert '"ironaccel-core>=9.8"' in (copy / "ironaccel-vulkan" / "pyproject.toml").read_text()
    assert '__version__ = "9.8.7"' in (copy / "ironaccel-cuda" / "src" / "ironaccel_cuda" / "__init__.py").read_text()


def test_a_distribution_that_disagrees_is_named(tmp_path, monkeypatch):
    copy = tmp_path / "repo"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv*", "dist*", "build", "*.so", "docs"))
    monkeypatch.setattr(release, "ROOT", copy)
    monkeypatch.setattr(release, "VERSION_FILE", copy / "VERSION")
    (copy / "ironaccel-qnn" / "LICENSE").unlink()
    pyproject = copy / "ironaccel-webgpu" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.2.0"', 'version = "0.1.9"', 1))
    found = release.problems()
    assert "ironaccel-qnn/LICENSE missing or not the repository's LICENSE" in found
    assert any(line.startswith("ironaccel-webgpu/pyproject.toml: version '0.1.9'") for line in found)
