"""Discovery, isolation, laziness, caching and selection of the BackendRegistry."""

from __future__ import annotations

import sys
import threading

import pytest

from ironaccel import BackendRegistry, DuplicateBackend, InvalidArgument, NotAvailable, PluginError
from ironaccel.testing import double

GROUP = "ironaccel.testbackends"  # the group the fake distributions use (conftest.py)


def registry_for(fake_site, *dists: str) -> BackendRegistry:
    fake_site(*dists)
    return BackendRegistry(GROUP)


def test_discovery_reads_metadata_only(fake_site):
    reg = registry_for(fake_site, "fakegood")
    assert "fakegood_plugin" not in sys.modules  # nothing imported at construction
    assert reg.names() == ["good", "other"]  # priority 5 first, then by name
    assert "fakegood_plugin" in sys.modules
    assert "fake_backends" not in sys.modules  # factories are resolved only on use
    assert "fakevendor_good" not in sys.modules
    assert reg.distribution("good") == ("fakegood", "1.0")


def test_probe_is_lazy_cached_and_per_backend(fake_site):
    reg = registry_for(fake_site, "fakegood")
    result = reg.probe("good")
    assert result.available and result.driver_version == "1.2"
    assert "fakevendor_good" in sys.modules
    probes = sys.modules["fake_backends"].PROBES
    assert probes == ["good"]  # probing good did not probe other
    assert reg.probe("good") is result
    assert probes == ["good"]
    reg.refresh("good")
    reg.probe("good")
    assert probes == ["good", "good"]
    reg.refresh()
    reg.probe("other")
    assert probes == ["good", "good", "other"]


def test_unavailable_backend_says_why(fake_site):
    reg = registry_for(fake_site, "fakegood")
    result = reg.probe("other")
    assert not result.available and result.reason == "no other device here" and result.fix == "buy one"
    with pytest.raises(NotAvailable) as info:
        reg.open("other")
    assert info.value.reason == "no other device here"
    # asked for by name: skipping it is no answer, so the message does not suggest IRONACCEL_DISABLE
    assert "IRONACCEL_DISABLE" not in str(info.value) and str(info.value).endswith("fix: buy one")
    with pytest.raises(NotAvailable):
        reg.devices("other")


def test_open_and_devices(fake_site):
    reg = registry_for(fake_site, "fakegood")
    assert reg.open("good") == ("opened", 0)
    with pytest.raises(InvalidArgument):
        reg.open("good", 3)
    assert [d.name for d in reg.devices("good")] == ["Good Device"]
    assert [d.name for d in reg.devices()] == ["Good Device"]  # other is skipped, not fatal
    assert reg.available() == ["good"]


def test_broken_plugins_are_isolated_and_reported(fake_site):
    reg = registry_for(fake_site, "fakegood", "fakeimportfail", "fakehookfail", "fakeprobefail", "fakemisspelled")
    assert set(reg.names()) == {"good", "other", "probefail", "factoryfail", "factoryraises"}
    failures = {(f.distribution, f.stage) for f in reg.failures()}
    assert ("fakeimportfail", "import") in failures
    assert ("fakehookfail", "hook") in failures
    assert ("fakemisspelled", "register") in failures
    by_dist = {f.distribution: f for f in reg.failures()}
    assert by_dist["fakeimportfail"].version == "1.0"
    assert "libfoo.so.1" in by_dist["fakeimportfail"].error
    assert "ironaccel_backend" in by_dist["fakemisspelled"].error
    # A probe that raises is contained and reported; the others still work.
    result = reg.probe("probefail")
    assert not result.available and "driver exploded" in result.reason
    assert any(f.stage == "probe" and f.backend == "probefail" for f in reg.failures())
    # A factory that fails is a PluginError for that backend only.
    assert not reg.probe("factoryfail").available
    with pytest.raises(PluginError) as info:
        reg.backend("factoryfail")
    assert info.value.distribution == "fakeprobefail" and info.value.stage == "factory"
    assert reg.probe("good").available
    # A raising library_dirs hook loses only its own folders.
    assert reg.library_dirs("good") == ["/opt/good/lib"]
    assert any(f.stage == "hook" and f.backend == "good" for f in reg.failures())


def test_duplicate_backend_names_both(fake_site):
    reg = registry_for(fake_site, "fakegood", "fakedupe")
    with pytest.raises(DuplicateBackend) as info:
        reg.backend("good")
    assert set(info.value.claimants) == {"fakegood", "fakedupe"}
    assert "fakegood" in str(info.value) and "fakedupe" in str(info.value)
    assert not reg.probe("good").available
    assert reg.probe("other").reason == "no other device here"  # unaffected


def test_env_explicit_order_and_unknown(fake_site, monkeypatch):
    reg = registry_for(fake_site, "fakegood")
    monkeypatch.setenv("IRONACCEL_BACKENDS", "other, good, cuda")
    assert reg.names() == ["other", "good", "cuda"]
    result = reg.probe("cuda")
    assert not result.available and "no installed distribution" in result.reason
    # true from the index and from a checkout
    assert result.fix == ("pip install ironaccel-cuda (from the index, or `pip install ./ironaccel-cuda` "
                          "from a checkout)")
    monkeypatch.setenv("IRONACCEL_BACKENDS", "good")
    assert reg.names() == ["good"]
    assert "not selected" in reg.probe("other").reason


def test_env_disable(fake_site, monkeypatch):
    reg = registry_for(fake_site, "fakegood")
    assert reg.probe("good").available
    monkeypatch.setenv("IRONACCEL_DISABLE", "good")
    assert reg.names() == ["other"]
    assert "disabled by IRONACCEL_DISABLE" in reg.probe("good").reason  # read at call time, cache or not
    with pytest.raises(NotAvailable):
        reg.open("good")
    monkeypatch.setenv("IRONACCEL_DISABLE", "*")
    assert reg.names() == []
    monkeypatch.delenv("IRONACCEL_DISABLE")
    assert reg.probe("good").available


def test_env_plugin_allow_list(fake_site, monkeypatch):
    fake_site("fakegood", "fakeimportfail")
    monkeypatch.setenv("IRONACCEL_PLUGINS", "")
    reg = BackendRegistry(GROUP)
    assert reg.names() == []
    assert "fakegood_plugin" not in sys.modules
    monkeypatch.setenv("IRONACCEL_PLUGINS", "fakegood")
    assert reg.names() == ["good", "other"]
    assert not reg.failures()  # the broken plugin was never imported
    monkeypatch.setenv("IRONACCEL_PLUGINS", "FakeImportFail")  # names are normalised
    assert reg.names() == []
    assert "IRONACCEL_PLUGINS" in reg.probe("good").reason
    assert [f.distribution for f in reg.failures()] == ["fakeimportfail"]


def test_concurrent_probes_run_once(fake_site):
    reg = registry_for(fake_site, "fakegood")
    barrier = threading.Barrier(16)
    results = []

    def worker():
        barrier.wait()
        results.append(reg.probe("good"))

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 16 and all(r is results[0] for r in results)
    assert sys.modules["fake_backends"].PROBES == ["good"]


def test_in_process_registration_of_the_double():
    reg = BackendRegistry(discover=False)
    reg.register(double)
    assert reg.names() == ["memory"]
    dev = reg.open("memory", 1)
    assert dev.descriptor.ordinal == 1
    with pytest.raises(InvalidArgument):
        reg.open("memory", 2)


def test_survey_only_probes_what_it_is_asked(fake_site):
    reg = registry_for(fake_site, "fakegood")
    reports = reg.survey(["other"])
    assert [r.name for r in reports] == ["other"]
    assert sys.modules["fake_backends"].PROBES == ["other"]
    assert "fakevendor_good" not in sys.modules
    full = {r.name: r for r in reg.survey()}
    assert full["good"].devices[0].name == "Good Device"
    assert full["good"].distribution == "fakegood" and full["good"].summary == "a good fake"
