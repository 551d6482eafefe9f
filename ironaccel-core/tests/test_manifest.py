"""backends.toml is the one list of distributions: everything that lists them again must agree (issue 9).

Runs `.ci/backends.py check` from the repository: tox.ini is what the manifest generates; the
ruff isort list, FIRST_PARTY, each plugin's BackendSpec.install and entry point, each package's
py.typed (and the package-data that ships it), the README's table and the .ci scripts follow it.
Skipped outside a checkout (an installed ironaccel-core has no backends.toml beside it).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "backends.py"

pytestmark = pytest.mark.skipif(not (ROOT / "backends.toml").is_file(), reason="not in a repository checkout")


def _manifest_module():  # type: ignore[no-untyped-def]
    pytest.importorskip("tomllib" if importlib.util.find_spec("tomllib") else "tomli")
    spec = importlib.util.spec_from_file_location("ironaccel_backends_manifest", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_everything_follows_backends_toml() -> None:
    manifest = _manifest_module()
    assert manifest.check(manifest.load()) == []


def test_the_check_finds_a_list_that_disagrees(tmp_path: Path) -> None:
    manifest = _manifest_module()
    dists = manifest.load()
    dropped = [d for d in dists if d.name != "neuron"]
    problems = manifest.check(dropped)
    assert any("tox.ini is not what backends.toml generates" in p for p in problems)
    assert any("FIRST_PARTY" in p for p in problems)
    assert any("known-first-party" in p for p in problems)
    assert any("the repository has" in p for p in problems)
    script = tmp_path / ".ci"
    script.mkdir()
    (script / "test").write_text("export IRONACCEL_REQUIRE=vulkan,webgpu,opengl\n")
    assert any(p.startswith(".ci/test:1 lists backends by hand") for p in manifest._check_scripts(dists, tmp_path))


def test_first_party_hints_are_the_manifest_installs() -> None:
    from ironaccel.registry import FIRST_PARTY

    manifest = _manifest_module()
    assert FIRST_PARTY == {d.name: d.install for d in manifest.backends(manifest.load())}
    assert FIRST_PARTY["rocm"] == "pip install 'ironaccel-rocm[hip]'"
