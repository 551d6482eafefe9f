"""Fixtures: fake plugin distributions on sys.path, built per test."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

GROUP = "ironaccel.testbackends"

# Plugin module sources, by distribution name.  Each backend's "vendor" module
# (fakevendor_<name>) is imported only by its probe, so laziness is observable.
BACKEND_MODULE = """
import sys
import threading
from ironaccel import ProbeResult, DeviceDescriptor, InvalidArgument

PROBES = []
REFRESHED = []
FACTORY_CALLS = []
SLOW_RELEASE = threading.Event()

class GoodBackend:
    name = "good"
    def probe(self):
        import fakevendor_good  # noqa: F401 - the "vendor library", loaded only here
        PROBES.append("good")
        return ProbeResult("good", True, reason="ok", device_count=1, driver_version="1.2")
    def refresh(self):
        REFRESHED.append(self.name)
    def devices(self):
        return [DeviceDescriptor("good", 0, "Good Device")]
    def open(self, ordinal=0):
        if ordinal != 0:
            raise InvalidArgument("good", "open", detail="bad ordinal")
        return ("opened", ordinal)

class OtherBackend(GoodBackend):
    name = "other"
    def probe(self):
        PROBES.append("other")
        return ProbeResult("other", False, reason="no other device here", fix="buy one")

class ProbeRaises(GoodBackend):
    name = "probefail"
    def probe(self):
        raise RuntimeError("driver exploded")

class SlowBackend(GoodBackend):
    name = "fakeslow"
    def probe(self):
        PROBES.append("fakeslow")
        SLOW_RELEASE.wait(60)
        return ProbeResult("fakeslow", True, reason="late but fine", device_count=1)

def failing_factory():
    FACTORY_CALLS.append(1)
    raise OSError("libfactory.so: cannot open shared object file")
"""

PLUGINS = {
    "fakegood": """
from ironaccel import BackendSpec, DeviceKind, Vendor, hookimpl

@hookimpl
def ironaccel_backends():
    return [BackendSpec("good", factory="fake_backends:GoodBackend", summary="a good fake", priority=5,
                        vendor=Vendor.MESA, kinds=(DeviceKind.CPU,), install="pip install fakegood"),
            BackendSpec("other", factory="fake_backends:OtherBackend")]

@hookimpl
def ironaccel_library_dirs(backend):
    return ["/opt/good/lib"] if backend == "good" else []
""",
    "fakeimportfail": """
raise ImportError("libfoo.so.1: cannot open shared object file")
""",
    "fakehookfail": """
from ironaccel import hookimpl

@hookimpl
def ironaccel_backends():
    raise RuntimeError("hook blew up")

@hookimpl
def ironaccel_library_dirs(backend):
    raise RuntimeError("dirs blew up")
""",
    "fakeprobefail": """
from ironaccel import BackendSpec, hookimpl

@hookimpl
def ironaccel_backends():
    return [BackendSpec("probefail", factory="fake_backends:ProbeRaises"),
            BackendSpec("factoryfail", factory="fake_backends:DoesNotExist"),
            BackendSpec("factoryraises", factory="fake_backends:failing_factory", install="pip install fakeprobefail")]
""",
    "fakeslow": """
from ironaccel import BackendSpec, hookimpl

@hookimpl
def ironaccel_backends():
    return [BackendSpec("fakeslow", factory="fake_backends:SlowBackend")]
""",
    "fakedupe": """
from ironaccel import BackendSpec, hookimpl

@hookimpl
def ironaccel_backends():
    return [BackendSpec("good", factory="fake_backends:GoodBackend")]
""",
    "fakeold": """
from ironaccel import BackendSpec, hookimpl

@hookimpl
def ironaccel_backends():
    return [BackendSpec("old", factory="fake_backends:GoodBackend", plugin_api="1.0")]
""",
    "fakefuture": """
from ironaccel import BackendSpec, hookimpl

@hookimpl
def ironaccel_backends():
    return [BackendSpec("future", factory="fake_never_imported:Backend", plugin_api="1.99")]
""",
    "fakemajor": """
from ironaccel import BackendSpec, hookimpl

@hookimpl
def ironaccel_backends():
    return [BackendSpec("major", factory="fake_never_imported:Backend", plugin_api="2.0")]
""",
    "fakebadapi": """
from ironaccel import BackendSpec, hookimpl

@hookimpl
def ironaccel_backends():
    return [BackendSpec("badapi", factory="fake_backends:GoodBackend", plugin_api="one")]
""",
    "fakemisspelled": """
from ironaccel import hookimpl

@hookimpl
def ironaccel_backend():  # missing the final s
    return []
""",
}


def make_site(root: Path, dists: list[str], group: str = GROUP) -> Path:
    """Write fake distributions (dist-info + plugin module) into `root`."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "fake_backends.py").write_text(textwrap.dedent(BACKEND_MODULE))
    (root / "fakevendor_good.py").write_text("LOADED = True\n")
    for dist in dists:
        (root / f"{dist}_plugin.py").write_text(textwrap.dedent(PLUGINS[dist]))
        info = root / f"{dist}-1.0.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[{group}]\n{dist} = {dist}_plugin\n")
    return root


@pytest.fixture
def site_builder():
    """`make_site` as a fixture, for tests that need a site outside sys.path."""
    return make_site


@pytest.fixture
def fake_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Build a site of the named fake distributions and put it first on sys.path."""
    for var in ("IRONACCEL_BACKENDS", "IRONACCEL_DISABLE", "IRONACCEL_PLUGINS", "IRONACCEL_REQUIRE",
                "IRONACCEL_PROBE_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)

    def build(*dists: str) -> Path:
        site = make_site(tmp_path / "site", list(dists))
        monkeypatch.syspath_prepend(str(site))
        return site

    yield build
    backends = sys.modules.get("fake_backends")
    if backends is not None:
        backends.SLOW_RELEASE.set()  # lets a probe the test left hanging return
    for mod in [m for m in sys.modules if m.startswith(("fake", "fakevendor"))]:
        del sys.modules[mod]
