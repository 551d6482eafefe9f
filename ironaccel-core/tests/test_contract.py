"""The versioned plugin contract (issue 41): PLUGIN_API, the table of documented names, deprecations,
plugins that target another contract, the kit run per target, and a plugin written against 1.0."""

from __future__ import annotations

import ctypes
import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import ironaccel
from ironaccel import contract
from ironaccel.cli import main
from ironaccel.errors import NotAvailable
from ironaccel.registry import BackendRegistry
from ironaccel.types import BackendSpec, ProbeResult

GROUP = "ironaccel.testbackends"
FIXTURE = Path(__file__).parent / "fixtures" / "contract_1_0"
MODULES = ("ironaccel.hookspecs", "ironaccel.types", "ironaccel.errors", "ironaccel.protocols", "ironaccel.probing",
           "ironaccel.compute", "ironaccel.testing.conformance", "ironaccel.testing.cbuild", "ironaccel.contract")


def _resolve(dotted: str) -> object:
    """The object a SINCE entry names: a module attribute, or an attribute/field/parameter below one."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if hasattr(obj, name):
                obj = getattr(obj, name)
            elif name in getattr(obj, "__dataclass_fields__", {}):
                obj = obj.__dataclass_fields__[name]  # type: ignore[attr-defined]
            elif callable(obj) and name in obj.__code__.co_varnames:  # type: ignore[attr-defined]
                obj = name  # a parameter
            else:
                raise AttributeError(f"{dotted}: no {name!r}")
        return obj
    raise ImportError(dotted)


def test_plugin_api_is_core_version_of_the_contract():
    assert ironaccel.PLUGIN_API == contract.PLUGIN_API == "1.2"
    assert contract.parse("1.2") == (1, 2) and contract.is_at_least("1.2", "1.1")
    for bad in ("1", "1.2.3", "v1.2", "01.2", 1.2, None):
        with pytest.raises(ValueError, match="MAJOR.MINOR"):
            contract.parse(bad)
    assert contract.incompatible(None) is None and contract.incompatible("1.0") is None
    assert "major version differs" in (contract.incompatible("2.0") or "")
    assert "newer than the 1.2" in (contract.incompatible("1.3") or "")


def test_every_documented_name_is_in_the_table_and_exists():
    """Removing or renaming a documented name fails here; so does adding one without its version."""
    for dotted, version in contract.SINCE.items():
        contract.parse(version)
        _resolve(dotted)
    for module in MODULES:
        for name in importlib.import_module(module).__all__:
            assert f"{module}.{name}" in contract.SINCE, f"{module}.{name} has no version in contract.SINCE"


def test_probe_guard_is_a_deprecated_alias_that_still_works():
    from ironaccel.probing import probe_guard

    with pytest.warns(DeprecationWarning, match=r"probe_guard is deprecated since plugin API 1\.2.*ProbedBackend"):
        @probe_guard
        def probe() -> ProbeResult:
            raise NotAvailable("x", "no x here", fix="buy one")
    result = probe()
    assert (result.available, result.reason, result.fix) == (False, "no x here", "buy one")
    assert "ironaccel.probing.probe_guard" in contract.DEPRECATED and "ironaccel.probing.probe_guard" in contract.SINCE


def test_deprecated_needs_a_table_entry():
    with pytest.raises(KeyError):
        contract.deprecated("ironaccel.nothing")


def test_backend_spec_states_its_target():
    assert BackendSpec("a", factory="m:f").plugin_api is None
    assert BackendSpec("a", factory="m:f", plugin_api="1.1").plugin_api == "1.1"
    with pytest.raises(ValueError, match="MAJOR.MINOR"):
        BackendSpec("a", factory="m:f", plugin_api="1")


def test_incompatible_plugins_are_reported_not_loaded(fake_site, capsys):
    fake_site("fakeold", "fakefuture", "fakemajor", "fakebadapi")
    reg = BackendRegistry(GROUP)
    assert sorted(reg.names()) == ["future", "major", "old"]
    assert reg.probe("old").available  # 1.0 is older than core's 1.2, same major: loads
    for name, why in (("future", "targets plugin API 1.99, newer than the 1.2"),
                      ("major", "targets plugin API 2.0 and this ironaccel implements 1.2: the major version")):
        result = reg.probe(name)
        assert not result.available and why in result.reason
        assert result.reason.startswith(f"fake{name} 1.0 cannot be loaded")
        assert "plugin API 1.x up to 1.2" in result.fix
        with pytest.raises(NotAvailable, match=why.split(",")[0]):
            reg.open(name)
    assert "fake_never_imported" not in sys.modules
    contract_failures = {(f.distribution, f.version, f.backend): f.error for f in reg.failures()
                         if f.stage == "contract"}
    assert set(contract_failures) == {("fakefuture", "1.0", "future"), ("fakemajor", "1.0", "major")}
    hook = [f for f in reg.failures() if f.distribution == "fakebadapi"]
    assert hook and hook[0].stage == "hook" and "MAJOR.MINOR" in hook[0].error
    assert main(["future", "major"], reg) == 1
    out = capsys.readouterr().out
    assert "fakefuture 1.0" in out and "[contract]" in out and "major version differs" in out


def test_conformance_target_resolution(fake_site):
    from ironaccel.testing.conformance import UNSTATED, ComputeDeviceConformance
    from ironaccel.testing.execution import ExecutionConformance

    assert issubclass(ComputeDeviceConformance, ExecutionConformance)  # folded in, still importable

    class Unstated(ComputeDeviceConformance):
        backend_name = "nosuchbackend"

    class ByHand(ComputeDeviceConformance, ExecutionConformance):
        backend_name = "nosuchbackend"

    class Stated(ComputeDeviceConformance):
        backend_name = "nosuchbackend"
        plugin_api = "1.0"

    assert Unstated.target_plugin_api() == UNSTATED == "1.1"
    assert ByHand.target_plugin_api() == "1.2"
    assert Stated.target_plugin_api() == "1.0"


def _fixture_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("IRONACCEL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(FIXTURE), *sys.path])
    return env


def test_a_plugin_written_against_1_0_loads_and_works():
    code = """
import warnings, numpy as np, ironaccel
from ironaccel.testing.conformance import scale_offset
assert "contract10" in ironaccel.names(), ironaccel.registry.failures()
assert ironaccel.registry.distribution("contract10") == ("ironaccel-contract10", "1.0.0")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    result = ironaccel.probe("contract10")
assert result.available, result
assert any(issubclass(w.category, DeprecationWarning) and "probe_guard" in str(w.message) for w in caught)
dev = ironaccel.open("contract10")
pipe = dev.pipeline("a * x + b", "main", buffers=2, params=3, workgroup_size=(64, 1, 1))
y = scale_offset(dev, np.arange(100, dtype=np.float32), 2.0, 1.0, pipe)
assert (y == 2 * np.arange(100, dtype=np.float32) + 1).all()
dev.close()
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_fixture_env(),
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_a_plugin_written_against_1_0_passes_its_kit():
    env = {**_fixture_env(), "IRONACCEL_REQUIRE": "contract10"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "--import-mode=importlib", str(FIXTURE / "kit_contract10.py")],
                          capture_output=True, text=True, env=env, timeout=300, cwd=FIXTURE)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    tail = proc.stdout.strip().splitlines()[-1]
    assert " passed" in tail and "failed" not in tail and "error" not in tail, tail
    assert "introduced in plugin API 1.1; contract10 targets 1.0" in proc.stdout  # 1.1's tests not required
    assert "introduced in plugin API 1.2; contract10 targets 1.0" in proc.stdout  # nor 1.2's execution model
    passed = int(tail.split(" passed")[0].split()[-1])
    assert passed >= 20, tail


# -- the small things -----------------------------------------------------------------------------------------


def test_a_typo_in_the_selection_warns_with_a_suggestion(fake_site, monkeypatch):
    fake_site("fakegood")
    reg = BackendRegistry(GROUP)
    monkeypatch.setenv("IRONACCEL_BACKENDS", "goood,cuda")
    with pytest.warns(RuntimeWarning, match=r"IRONACCEL_BACKENDS names 'goood'.*did you mean 'good'\?"):
        assert reg.names() == ["goood", "cuda"]  # cuda: first-party, not installed here: no warning
    monkeypatch.setenv("IRONACCEL_BACKENDS", "good")
    monkeypatch.setenv("IRONACCEL_DISABLE", "vulkna")
    with pytest.warns(RuntimeWarning, match=r"IRONACCEL_DISABLE names 'vulkna'.*did you mean 'vulkan'\?"):
        reg.names()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg.names()  # once per name


def test_unknown_names_get_did_you_mean(fake_site):
    fake_site("fakegood")
    reg = BackendRegistry(GROUP)
    for asked, meant in (("Good", "good"), ("Vulkan", "vulkan"), ("cdua", "cuda")):
        with pytest.raises(NotAvailable, match=f"did you mean '{meant}'") as info:
            reg.open(asked)
        assert "IRONACCEL_DISABLE" not in str(info.value)  # asked for by name: no hint to skip it
    with pytest.raises(NotAvailable) as info:
        reg.open("zzzz")
    assert "did you mean" not in str(info.value)


def test_not_available_says_how_to_skip_unless_asked_by_name():
    assert str(NotAvailable("cuda", "no driver", fix="install it")).endswith("skip it with IRONACCEL_DISABLE=cuda")
    named = NotAvailable("cuda", "no driver", fix="install it", named=True)
    assert str(named) == "cuda: no driver; fix: install it" and named.env_var == "IRONACCEL_DISABLE"


def test_device_descriptor_repr_is_short():
    from ironaccel.types import CapabilityFlags, DeviceDescriptor, DeviceKind, Vendor

    extras = {f"limit_{i}": list(range(50)) for i in range(40)}
    d = DeviceDescriptor("cuda", 1, "NVIDIA H200", Vendor.NVIDIA, DeviceKind.GPU, 141 * 2**30,
                         capabilities=CapabilityFlags.FP16 | CapabilityFlags.FP64, extras=extras)
    text = repr(d)
    assert len(text) < 160 and "\n" not in text, text
    assert text.startswith("<DeviceDescriptor cuda:1 'NVIDIA H200' gpu nvidia 141.0 GiB")
    assert "2 capabilities, 40 extras" in text and len(str(d.to_dict())) > 5000


def test_cli_no_devices_says_they_were_not_listed(fake_site, capsys):
    fake_site("fakegood")
    reg = BackendRegistry(GROUP)
    assert main(["good", "--no-devices"], reg) == 0
    out = capsys.readouterr().out
    assert "0 device(s)" not in out and "devices not listed" in out
    assert main(["good"], reg) == 0
    assert "1 device(s)" in capsys.readouterr().out


def test_cli_version_names_core_and_each_backend_distribution(fake_site, capsys):
    fake_site("fakegood", "fakeimportfail")
    reg = BackendRegistry(GROUP)
    assert main(["--version"], reg) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"ironaccel {ironaccel.__version__} (plugin API {ironaccel.PLUGIN_API})"
    assert "  fakegood 1.0 (good, other)" in out
    assert "  fakeimportfail 1.0 (failed to load: ironaccel --failures)" in out


def test_cli_typo_warning_goes_into_the_output(fake_site, capsys, monkeypatch):
    fake_site("fakegood")
    reg = BackendRegistry(GROUP)
    monkeypatch.setenv("IRONACCEL_BACKENDS", "god")
    assert main([], reg) == 1
    captured = capsys.readouterr()
    assert "warning: IRONACCEL_BACKENDS names 'god'" in captured.out and "did you mean 'good'" in captured.out
    assert not captured.err


def test_load_library_names_its_variable_in_the_fix(monkeypatch, tmp_path):
    from ironaccel.probing import load_library

    monkeypatch.setenv("IRONACCEL_FAKE_LIB", str(tmp_path))
    monkeypatch.setattr(ctypes, "CDLL", ctypes.CDLL)
    with pytest.raises(NotAvailable) as info:
        load_library("fake", ["libnothing-here.so.9"], env_var="IRONACCEL_FAKE_LIB")
    assert info.value.fix == "set IRONACCEL_FAKE_LIB to the library file or its folder"
    with pytest.raises(NotAvailable) as info:
        load_library("fake", ["libnothing-here.so.9"], env_var="IRONACCEL_FAKE_LIB", fix="install libnothing")
    assert info.value.fix == "install libnothing; or set IRONACCEL_FAKE_LIB to the library file or its folder"
    with pytest.raises(NotAvailable) as info:
        load_library("fake", ["libnothing-here.so.9"], fix="install libnothing")
    assert info.value.fix == "install libnothing"


def test_install_hints_hold_from_the_index_and_a_checkout():
    from ironaccel.registry import install_hint

    assert install_hint("vulkan") == (
        "pip install ironaccel-vulkan (from the index, or `pip install ./ironaccel-vulkan` from a checkout)")
    assert install_hint("rocm") == (
        "pip install 'ironaccel-rocm[hip]' (from the index, or `pip install './ironaccel-rocm[hip]'` from a checkout)")
    assert install_hint("nosuch") == ""
    root = Path(__file__).resolve().parents[2]
    if (root / "backends.toml").is_file():  # in a checkout, the folder the hint names exists
        assert (root / "ironaccel-vulkan" / "pyproject.toml").is_file()


# -- no import cycle ------------------------------------------------------------------------------------------


def _imports_script():  # type: ignore[no-untyped-def]
    path = Path(__file__).resolve().parents[2] / ".ci" / "imports.py"
    if not path.is_file():
        pytest.skip("not in a repository checkout")
    spec = importlib.util.spec_from_file_location("ironaccel_ci_imports", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_no_distribution_has_an_import_cycle():
    script = _imports_script()
    proc = subprocess.run([sys.executable, script.__file__], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_import_check_finds_a_cycle_and_a_stray_lazy_import(tmp_path):
    script = _imports_script()
    pkg = tmp_path / "src" / "ironaccel_demo"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n    import requests\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import y\n")
    problems = script.check(tmp_path / "src", "ironaccel_demo")
    assert any("import cycle in ironaccel_demo: ironaccel_demo.a -> ironaccel_demo.b -> ironaccel_demo.a" in p
               for p in problems), problems
    assert any("a function imports requests" in p for p in problems), problems
    assert len(problems) == 2, problems  # c's TYPE_CHECKING import is no edge
