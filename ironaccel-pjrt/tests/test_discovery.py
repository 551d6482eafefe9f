"""Discovery (entry points, namespace packages, env var), the client-less probe, and laziness."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ironaccel.errors import NotAvailable, Unsupported
from ironaccel_pjrt.api import PluginApi, load_api
from ironaccel_pjrt.backend import Backend
from ironaccel_pjrt.discovery import ENV_PLUGIN, PluginLocation, discover

pytestmark = pytest.mark.backend("pjrt")


def _maps() -> str:
    return Path("/proc/self/maps").read_text()


def test_installed_plugins_are_discovered_without_loading() -> None:
    code = textwrap.dedent(
        """
        import json
        from ironaccel_pjrt.discovery import discover
        found = discover()
        maps = open("/proc/self/maps").read()
        print(json.dumps([[p.name, p.path, p.source, p.path in maps] for p in found]))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    found = json.loads(out)
    assert found, "no PJRT plugin discovered"
    assert any(src.startswith(("entry point", "namespace package", "package libtpu")) for _, _, src, _ in found), found
    for name, path, _, mapped in found:
        assert os.path.isfile(path), (name, path)
        assert not mapped, f"discovery dlopened {path}"


def test_plugin_module_and_survey_without_pjrt_load_nothing() -> None:
    code = textwrap.dedent(
        """
        import sys, ironaccel
        ironaccel.registry.names(); ironaccel.registry.spec("pjrt")
        import ironaccel_pjrt, ironaccel_pjrt.plugin
        maps = open("/proc/self/maps").read()
        bad = [l for l in maps.splitlines() if "pjrt" in l.lower() and ".so" in l]
        assert not bad, bad
        assert "ironaccel_pjrt.api" not in sys.modules
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_env_var_names_a_plugin_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = discover()
    if not real:
        pytest.skip("no PJRT plugin discovered")
    link = tmp_path / "renamed_plugin.so"
    link.symlink_to(real[0].path)
    missing = tmp_path / "missing_plugin.so"
    monkeypatch.setenv(ENV_PLUGIN, os.pathsep.join([str(link), str(missing)]))
    found = discover()
    first = found[0]
    assert first.source == f"${ENV_PLUGIN}" and first.path == str(link) and first.name == "renamed_plugin"
    # The symlink and the installed file are one plugin: listed once, under the env var.
    assert [os.path.realpath(p.path) for p in found].count(os.path.realpath(real[0].path)) == 1
    assert any(p.path == str(missing) for p in found)
    assert load_api(str(link)) is load_api(real[0].path)  # one dlopen per real file


def test_env_var_folder_and_bad_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "not_a_plugin.so").write_bytes(b"\x7fELF garbage")
    monkeypatch.setenv(ENV_PLUGIN, str(folder))
    found = discover()
    assert found[0].path == str(folder / "not_a_plugin.so")
    with pytest.raises(NotAvailable) as info:
        load_api(found[0].path)
    assert "failed to load" in info.value.reason
    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    if os.path.exists(libc):
        with pytest.raises(NotAvailable, match="does not export GetPjrtApi"):
            PluginApi(libc)


def test_entry_point_discovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A distribution advertising jax_plugins:fake_ep, as jax-cuda13-pjrt does for xla_cuda13.
    site = tmp_path / "site"
    module = site / "fake_pjrt_dist" / "fake_ep"
    module.mkdir(parents=True)
    (module / "fake_ep_plugin.so").write_bytes(b"")  # discovery must find it without loading it
    (module / "helper.so").write_bytes(b"")  # not named like a plugin: ignored when one is
    info = site / "fake_pjrt_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-pjrt-dist\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[jax_plugins]\nfake_ep = fake_pjrt_dist.fake_ep\n")
    monkeypatch.syspath_prepend(str(site))
    found = [p for p in discover() if p.name == "fake_ep"]
    assert [p.path for p in found] == [str(module / "fake_ep_plugin.so")]
    assert found[0].source == "entry point jax_plugins:fake_ep"
    assert found[0].distribution == "fake-pjrt-dist"
    assert "fake_pjrt_dist" not in sys.modules  # located through metadata, never imported


def test_namespace_package_discovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = discover()
    if not real:
        pytest.skip("no PJRT plugin discovered")
    namespace = tmp_path / "xla_plugins" / "fake_ns"
    namespace.mkdir(parents=True)
    copy = namespace / "pjrt_fake_ns.so"
    copy.write_bytes(b"")  # a distinct file (not deduplicated); loading it would fail, discovery must not load
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    importlib.invalidate_caches()
    sys.modules.pop("xla_plugins", None)
    found = {p.name: p for p in discover()}
    assert "fake_ns" in found and found["fake_ns"].source == "namespace package xla_plugins"


def test_probe_reads_version_and_attributes_without_a_client() -> None:
    backend = Backend()
    result = backend.probe()
    assert result.available, result.reason
    plugins = result.extras["plugins"]
    assert plugins and all("api_version" in p or "error" in p for p in plugins)
    loaded = [p for p in plugins if "api_version" in p]
    assert loaded, plugins
    for p in loaded:
        major, minor = (int(x) for x in p["api_version"].split("."))
        assert major == 0 and minor >= 81, p
        assert "stablehlo_current_version" in p["attributes"], p["attributes"]
        assert re.fullmatch(r"\d+\.\d+", p["api_version"])
    assert backend._clients == {}, "the probe must not create a client"
    assert result.runtime_version and all(v in result.runtime_version for v in (p["api_version"] for p in loaded))


def test_api_version_matches_the_table(plugin: PluginLocation) -> None:
    if not plugin.path:
        pytest.skip("no PJRT plugin discovered")
    api = load_api(plugin.path)
    major, minor = api.version
    assert major == 0 and minor >= 81
    # 0.81 ends its table at slot 118; each later minor version only appends.
    assert api.table_size >= 40 + 118 * 8
    assert api.has("PJRT_Client_Compile") and api.has("PJRT_LoadedExecutable_Execute")
    assert api.has("PJRT_Device_GetAttributes") == (minor >= 92)


def test_missing_function_is_unsupported_not_a_crash(plugin: PluginLocation, monkeypatch: pytest.MonkeyPatch) -> None:
    if not plugin.path:
        pytest.skip("no PJRT plugin discovered")
    api = PluginApi(plugin.path)  # a private table object, so truncating it affects nothing else
    with pytest.raises(Unsupported) as info:
        api.function("PJRT_Not_A_Function")
    assert info.value.op == "PJRT_Not_A_Function"
    # Pretend the plugin is older than PJRT_Client_Compile's slot: the call must be refused, not made.
    from ironaccel_pjrt import capi

    monkeypatch.setattr(api, "table_size", capi.SLOT_OFFSET["PJRT_Client_Compile"])
    assert not api.has("PJRT_Client_Compile")
    with pytest.raises(Unsupported, match="PJRT API 0"):
        api.call("PJRT_Client_Compile", api.args("PJRT_Client_Compile"))
