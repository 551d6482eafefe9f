"""The conformance kit: the pytest plugin's skip/fail behaviour and the conformance classes on the double."""

from __future__ import annotations

import pytest

from ironaccel import registry
from ironaccel.testing import double
from ironaccel.testing.conformance import BackendConformance, ComputeDeviceConformance
from ironaccel.testing.execution import ExecutionConformance

if "memory" not in registry.installed():
    registry.register(double)  # in-process only: the double is never an entry-point backend

PLUGIN_TEST = """
import pytest

pytestmark = pytest.mark.backend("nosuchbackend")

def test_needs_backend():
    assert False, "must not run"

def test_fixture(require_backend):
    require_backend("nosuchbackend2")
"""


def test_marker_skips_with_the_probe_reason(pytester, monkeypatch):
    monkeypatch.delenv("IRONACCEL_REQUIRE", raising=False)
    pytester.makepyfile(PLUGIN_TEST)
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*no installed distribution provides backend 'nosuchbackend'*"])


def test_require_env_turns_skips_into_failures(pytester, monkeypatch):
    monkeypatch.setenv("IRONACCEL_REQUIRE", "nosuchbackend,nosuchbackend2")
    pytester.makepyfile(PLUGIN_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)  # failed in setup: the run is red
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*required by IRONACCEL_REQUIRE*"])


def test_require_env_catches_skips_from_inside_the_test(pytester, monkeypatch):
    monkeypatch.setenv("IRONACCEL_REQUIRE", "*")
    pytester.makepyfile(
        """
        import pytest
        from ironaccel import registry
        from ironaccel.testing import double
        registry.register(double)

        @pytest.mark.backend("memory")
        def test_inner_skip():
            pytest.skip("optional peer missing")

        def test_unmarked_skip_is_left_alone():
            pytest.skip("not a backend test")
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, skipped=1)


def test_a_test_needing_a_missing_backend_that_is_not_required_may_skip(pytester, monkeypatch):
    monkeypatch.setenv("IRONACCEL_REQUIRE", "memory")
    pytester.makepyfile(
        """
        import pytest
        from ironaccel import registry
        from ironaccel.testing import double
        registry.register(double)

        @pytest.mark.backend("memory")
        @pytest.mark.backend("nosuchbackend")
        def test_needs_both():
            pass

        @pytest.mark.backend("memory")
        def test_needs_the_required_one_and_skips():
            pytest.skip("no")
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")  # its own registry
    result.assert_outcomes(failed=1, skipped=1)


class TestDoubleBackend(BackendConformance):
    backend_name = "memory"


class TestDoubleCompute(ComputeDeviceConformance, ExecutionConformance):
    backend_name = "memory"
    scale_offset_code = double.SCALE_OFFSET
    broken_code = double.BROKEN
    typed_params_code = double.TYPED_PARAMS
    constants_code = double.CONSTANTS


def test_double_is_not_an_entry_point_backend():
    from importlib import metadata

    assert all(ep.name != "memory" for ep in metadata.entry_points(group="ironaccel.backends"))
    with pytest.raises(Exception):  # noqa: B017 - any failure: it is simply not there
        registry.__class__().spec("memory")
