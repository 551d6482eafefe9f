"""The survey CLI and import-time laziness, in fresh processes with the real entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Vendor bindings and libraries that `import ironaccel` and listing backends must never load.
VENDOR_MODULES = ["cuda", "cuda.bindings", "vulkan", "wgpu", "moderngl", "glcontext", "hip", "jax", "jaxlib",
                  "Metal", "objc", "cupy", "torch"]


def run(code: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_import_and_listing_load_no_vendor_module():
    code = f"""
import sys, ironaccel
assert ironaccel.names() is not None
ironaccel.registry.installed(); ironaccel.registry.failures()
loaded = [m for m in {VENDOR_MODULES!r} if m in sys.modules]
libs = [l for l in open('/proc/self/maps').read().split() if any(v in l for v in
        ('libcuda', 'libvulkan', 'libamdhip', 'libze_loader', 'pjrt', 'libEGL', 'libnrt', 'libQnn'))]
print(loaded, sorted(set(libs)))
assert not loaded and not libs, (loaded, libs)
"""
    proc = run(code)
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_broken_plugin_never_breaks_import_or_cli(tmp_path, site_builder):
    site = site_builder(tmp_path, ["fakeimportfail", "fakehookfail"], group="ironaccel.backends")
    env = {"PYTHONPATH": str(site), "IRONACCEL_BACKENDS": "memory"}
    proc = run("import ironaccel; print(len(ironaccel.registry.failures()))", env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "2"
    cli = subprocess.run([sys.executable, "-m", "ironaccel", "--json"], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=120)
    assert cli.returncode == 1 and not cli.stderr, cli.stderr  # 1: memory, asked for by name, is not installed
    doc = json.loads(cli.stdout)
    stages = {(f["distribution"], f["stage"]) for f in doc["failures"]}
    assert {("fakeimportfail", "import"), ("fakehookfail", "hook")} <= stages
    assert doc["backends"][0]["name"] == "memory"
    assert "no installed distribution" in doc["backends"][0]["probe"]["reason"]


def test_cli_text_and_exit_codes(tmp_path):
    env = {**os.environ, "IRONACCEL_BACKENDS": "nosuch"}
    proc = subprocess.run([sys.executable, "-m", "ironaccel", "nosuch"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 1
    assert "nosuch" in proc.stdout and "unavailable" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "ironaccel", "--no-devices"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 1 and "1 backend(s)" in proc.stdout  # IRONACCEL_BACKENDS names it, as the argument did


# Run before `import ironaccel` in a fresh process: records every read of plugin metadata (an open of an
# entry_points.txt, a call of importlib.metadata.entry_points), so a test can say when discovery happened.
WATCH_DISCOVERY = """
import importlib.metadata, sys
READS = []
sys.addaudithook(lambda event, args: READS.append(str(args[0])) if event == "open" and str(args[0]).endswith(
    "entry_points.txt") else None)
_entry_points = importlib.metadata.entry_points
def _watched(*args, **kwargs):
    READS.append("importlib.metadata.entry_points")
    return _entry_points(*args, **kwargs)
importlib.metadata.entry_points = _watched
"""


def test_import_reads_no_plugin_metadata_and_no_pluggy():
    # `import ironaccel`, its errors or its registry's name: no pluggy, no entry point read; the first call that
    # needs the backends reads them (which shows that the watch sees a read), and `ironaccel.registry` is the
    # process-wide BackendRegistry in every import order.
    for imports in ("import ironaccel", "import ironaccel.errors", "from ironaccel.errors import NotAvailable",
                    "import ironaccel.registry", "from ironaccel import registry, BackendRegistry, PLUGIN_API",
                    "import ironaccel.diskcache", "import ironaccel.cli"):
        code = WATCH_DISCOVERY + f"""
{imports}
import ironaccel
assert "pluggy" not in sys.modules and not READS, READS[:3]
assert type(ironaccel.registry).__name__ == "BackendRegistry", ironaccel.registry
assert isinstance(ironaccel.registry, ironaccel.BackendRegistry)
ironaccel.names()
assert "pluggy" in sys.modules and any(r.endswith("entry_points.txt") for r in READS), READS[:3]
assert ironaccel.hookimpl is ironaccel.hookspecs.hookimpl
"""
        proc = run(code)
        assert proc.returncode == 0, (imports, proc.stderr + proc.stdout)
