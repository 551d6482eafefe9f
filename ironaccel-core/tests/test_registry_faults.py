"""The registry faults a held-out third-party plugin found (issue 9), one test each."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import ironaccel
from ironaccel import BackendRegistry, DuplicateBackend, InvalidArgument, NotAvailable, PluginError
from ironaccel.cli import main, render

GROUP = "ironaccel.testbackends"


def registry_for(fake_site, *dists: str) -> BackendRegistry:
    fake_site(*dists)
    return BackendRegistry(GROUP)


def _fake(name: str):
    return sys.modules["fake_backends"].__dict__[name]


def test_failing_factory_is_recorded_once_and_refresh_clears_it(fake_site):
    reg = registry_for(fake_site, "fakeprobefail")
    for _ in range(11):
        with pytest.raises(PluginError) as info:
            reg.backend("factoryraises")
        assert "libfactory.so" in str(info.value)
    result = reg.probe("factoryraises")
    assert not result.available and result.fix == "reinstall fakeprobefail: pip install fakeprobefail"
    factory = [f for f in reg.failures() if f.stage == "factory" and f.backend == "factoryraises"]
    assert len(factory) == 1 and "libfactory.so" in factory[0].error
    assert len(_fake("FACTORY_CALLS")) == 1  # the factory is not called again either
    reg.refresh()
    assert not [f for f in reg.failures() if f.stage == "factory"]
    with pytest.raises(PluginError):
        reg.backend("factoryraises")  # refresh() lets the factory run again
    assert len(_fake("FACTORY_CALLS")) == 2
    assert len([f for f in reg.failures() if f.stage == "factory"]) == 1


def test_plugin_allow_list_set_later_applies_to_a_cached_probe(fake_site, monkeypatch):
    reg = registry_for(fake_site, "fakegood")
    assert reg.probe("good").available  # cached now
    monkeypatch.setenv("IRONACCEL_PLUGINS", "someone-else")
    result = reg.probe("good")
    assert not result.available and "IRONACCEL_PLUGINS" in result.reason
    with pytest.raises(NotAvailable) as info:
        reg.open("good")
    assert info.value.reason == result.reason  # probe and open agree
    monkeypatch.delenv("IRONACCEL_PLUGINS")
    assert reg.probe("good").available


def test_backend_of_an_excluded_distribution_says_so(fake_site, monkeypatch):
    fake_site("fakegood", "fakeslow")
    monkeypatch.setenv("IRONACCEL_PLUGINS", "fakegood")
    reg = BackendRegistry(GROUP)
    result = reg.probe("fakeslow")  # its entry point is named after the backend
    assert not result.available
    assert "no installed distribution" not in result.reason
    assert result.reason == "backend 'fakeslow' comes from fakeslow, which IRONACCEL_PLUGINS='fakegood' leaves out"
    assert result.fix == "add fakeslow to IRONACCEL_PLUGINS or unset it"
    monkeypatch.setenv("IRONACCEL_PLUGINS", "")
    unknown = BackendRegistry(GROUP).probe("good")  # no entry point names it: the excluded ones are listed
    assert "IRONACCEL_PLUGINS='' leaves out fakegood, fakeslow" in unknown.reason
    assert "IRONACCEL_PLUGINS" in unknown.fix


def test_backend_of_a_plugin_that_failed_to_import_says_so(fake_site):
    reg = registry_for(fake_site, "fakegood", "fakeimportfail")
    result = reg.probe("fakeimportfail")
    assert not result.available
    assert result.reason.startswith("the plugin of fakeimportfail 1.0, which provides backend 'fakeimportfail', "
                                    "failed at import: ImportError: libfoo.so.1")
    assert "ironaccel --failures" in result.fix
    other = reg.probe("nosuch")
    assert "no installed distribution provides backend 'nosuch'" in other.reason
    assert "failed to load and may provide it: fakeimportfail 1.0" in other.reason


def test_duplicate_backend_names_versions_and_the_cli_says_it_once(fake_site):
    reg = registry_for(fake_site, "fakegood", "fakedupe")
    with pytest.raises(DuplicateBackend) as info:
        reg.backend("good")
    first, second = info.value.claimants  # in the order the site lists them
    assert {first, second} == {"fakegood", "fakedupe"}
    assert (info.value.distribution, info.value.version) == (second, "1.0")
    claim = f"backend 'good' is claimed by both {first} 1.0 and {second} 1.0"
    assert str(info.value) == (f"good: plugin {second} 1.0 failed at register: {claim}; uninstall one or choose "
                               "one with IRONACCEL_PLUGINS")
    out = render(reg.survey(["other"]), 0.0, reg, failures=True)
    line = next(ln for ln in out.splitlines() if "[register]" in ln)
    assert line == (f"  {second} 1.0 [register] {second} = {second}_plugin: {claim}; uninstall one or choose "
                    "one with IRONACCEL_PLUGINS")


def test_a_hung_probe_misses_its_deadline_alone(fake_site, monkeypatch):
    reg = registry_for(fake_site, "fakegood", "fakeslow")
    monkeypatch.setenv("IRONACCEL_PROBE_TIMEOUT", "0.5")
    start = time.monotonic()
    reports = {r.name: r for r in reg.survey(["fakeslow", "good", "other"])}
    assert time.monotonic() - start < 3
    slow = reports["fakeslow"].probe
    assert not slow.available and slow.reason.startswith("probe timed out after 0.5 s")
    assert "IRONACCEL_PROBE_TIMEOUT" in slow.fix
    assert reports["good"].probe.available and reports["good"].devices
    assert reports["other"].probe.reason == "no other device here"
    assert [f for f in reg.failures() if f.backend == "fakeslow" and f.stage == "probe"]
    # Asked again, before or after refresh(), the hung probe is neither waited for again nor started twice.
    start = time.monotonic()
    assert reg.probe("fakeslow") is slow
    reg.refresh()
    assert "timed out" in reg.probe("fakeslow").reason
    assert time.monotonic() - start < 0.4
    assert len([f for f in reg.failures() if f.backend == "fakeslow" and f.stage == "probe"]) == 1
    assert _fake("PROBES").count("fakeslow") == 1
    # Once it returns, its own result replaces the timeout; a refresh then probes it again.
    _fake("SLOW_RELEASE").set()
    deadline = time.monotonic() + 10
    while not reg.probe("fakeslow").available and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reg.probe("fakeslow").reason == "late but fine"
    assert _fake("PROBES").count("fakeslow") == 1
    reg.refresh("fakeslow")
    assert reg.probe("fakeslow").available
    assert _fake("PROBES").count("fakeslow") == 2


def test_probe_timeout_setting(fake_site, monkeypatch):
    reg = registry_for(fake_site, "fakegood")
    monkeypatch.setenv("IRONACCEL_PROBE_TIMEOUT", "soon")
    result = reg.probe("good")
    assert not result.available and "IRONACCEL_PROBE_TIMEOUT='soon' is not a number of seconds" in result.reason
    monkeypatch.setenv("IRONACCEL_PROBE_TIMEOUT", "0")  # no deadline: the probe runs in the calling thread
    assert reg.probe("good").available


def test_refresh_reaches_the_backend(fake_site):
    reg = registry_for(fake_site, "fakegood")
    first = reg.probe("good")
    reg.refresh("good")
    assert _fake("REFRESHED") == ["good"]
    assert reg.probe("good") is not first
    reg.probe("other")
    reg.refresh()
    assert sorted(_fake("REFRESHED")) == ["good", "good", "other"]


@pytest.mark.parametrize("call", [
    lambda: ironaccel.open(123),  # type: ignore[arg-type]
    lambda: ironaccel.probe(["vulkan"]),  # type: ignore[arg-type]
    lambda: ironaccel.backend(None),  # type: ignore[arg-type]
    lambda: ironaccel.devices(3.5),  # type: ignore[arg-type]
    lambda: ironaccel.survey("vulkan"),  # type: ignore[arg-type]
    lambda: ironaccel.survey([1]),  # type: ignore[list-item]
])
def test_a_name_that_is_not_a_str_is_invalid_argument(call):
    with pytest.raises(InvalidArgument) as info:
        call()
    text = str(info.value)
    assert "backend name" in text or "names is a list" in text
    assert info.value.backend == "ironaccel"


def _cli(*args: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "IRONACCEL_BACKENDS"}
    return subprocess.run([sys.executable, "-m", "ironaccel", *args], capture_output=True, text=True,
                          env={**full, **(env or {})}, timeout=120, **kwargs)


def test_cli_quiet_when_the_reader_goes_away():
    read, write = os.pipe()
    os.close(read)  # the reader has already gone, as `| head -1` may have by the time the survey prints
    try:
        proc = subprocess.run([sys.executable, "-m", "ironaccel", "--no-devices"], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120,
                              env={**os.environ, "IRONACCEL_BACKENDS": "nosuch"})
    finally:
        os.close(write)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_cli_exit_status_is_the_same_for_named_and_selected_backends():
    by_arg = _cli("--no-devices", "nosuch")
    by_env = _cli("--no-devices", env={"IRONACCEL_BACKENDS": "nosuch"})
    assert by_arg.returncode == by_env.returncode == 1
    assert "nosuch" in by_env.stdout and "unavailable" in by_env.stdout
    everything = _cli("--no-devices", env={"IRONACCEL_DISABLE": "*"})
    assert everything.returncode == 0
    helptext = _cli("--help").stdout
    assert "exit status" in helptext and "IRONACCEL_BACKENDS" in helptext


def test_main_returns_the_exit_status(fake_site, monkeypatch, capsys):
    reg = registry_for(fake_site, "fakegood")
    assert main(["good", "--no-devices"], reg) == 0
    assert main(["other", "--no-devices"], reg) == 1
    monkeypatch.setenv("IRONACCEL_BACKENDS", "other")
    assert main(["--no-devices"], reg) == 1
    monkeypatch.delenv("IRONACCEL_BACKENDS")
    assert main(["--no-devices"], reg) == 0  # the whole survey: other is unavailable, not an error
    capsys.readouterr()


def test_survey_carries_what_the_spec_says(fake_site):
    from ironaccel.registry import FIRST_PARTY

    reg = registry_for(fake_site, "fakegood")
    good, cuda = reg.survey(["good", "cuda"], devices=False)
    assert (good.vendor.value, [k.value for k in good.kinds], good.install) == ("mesa", ["cpu"], "pip install fakegood")
    assert good.to_dict()["kinds"] == ["cpu"] and good.to_dict()["install"] == "pip install fakegood"
    assert cuda.distribution is None and cuda.install == cuda.probe.fix
    assert cuda.install.startswith(FIRST_PARTY["cuda"] + " (from the index, or `pip install ./ironaccel-cuda`")
