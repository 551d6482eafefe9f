"""pytest plugin (entry point ``pytest11``): backend markers and strict runs.

    pytestmark = pytest.mark.backend("vulkan")   # skip with the probe's reason if unusable

    def test_x(require_backend):
        backend = require_backend("cuda")        # the same, as a fixture

``IRONACCEL_REQUIRE=cuda,vulkan`` (or ``*``) turns every skip of a test marked
for one of those backends -- from the marker, the fixture or anything inside
the test -- into a failure.  Use it on real hardware and in CI, where a skip
would hide a backend that should have worked.  A conformance test that the
plugin API version a plugin targets does not include is skipped, not failed
(`ironaccel.testing.conformance`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

ENV_REQUIRE = "IRONACCEL_REQUIRE"


def required_backends() -> set[str]:
    """Backends named in IRONACCEL_REQUIRE (``{"*"}`` for all)."""
    return {p.strip() for p in os.environ.get(ENV_REQUIRE, "").split(",") if p.strip()}


def _is_required(name: str) -> bool:
    required = required_backends()
    return "*" in required or name in required


def require(name: str) -> Any:
    """The Backend `name` if its probe passes; else skip (or fail, if required)."""
    from ironaccel.registry import registry

    result = registry.probe(name)
    if not result.available:
        message = f"backend {name} unavailable: {result.reason}"
        if _is_required(name):
            pytest.fail(f"{message} (required by {ENV_REQUIRE})", pytrace=False)
        pytest.skip(message)
    return registry.backend(name)


def _usable(name: str) -> bool:
    from ironaccel.registry import registry

    return bool(registry.probe(name).available)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "backend(name): the test needs ironaccel backend `name`; skipped with the probe's reason "
        f"when it is unavailable, failed instead when {ENV_REQUIRE} names it",
    )


def _marked_backends(item: pytest.Item) -> list[str]:
    return [m.args[0] for m in item.iter_markers("backend") if m.args]


def pytest_runtest_setup(item: pytest.Item) -> None:
    for name in _marked_backends(item):
        require(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    outcome: Any = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail") or getattr(item, "_ironaccel_not_in_target", False):
        return  # a conformance test newer than the plugin API the plugin targets is not required of it
    names = _marked_backends(item) + list(getattr(item, "_ironaccel_backends", ()))
    strict = [n for n in names if _is_required(n)]
    if strict and not any(not _is_required(n) and not _usable(n) for n in names):
        # (a test that needs a required backend and one that is not required, missing here, may skip)
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, but {ENV_REQUIRE} requires backend {strict[0]}: {reason}"


@pytest.fixture
def require_backend(request: pytest.FixtureRequest) -> Callable[[str], Any]:
    """Call with a backend name: returns the Backend, or skips/fails like the marker."""

    def _require(name: str) -> Any:
        request.node._ironaccel_backends = [*getattr(request.node, "_ironaccel_backends", ()), name]
        return require(name)

    return _require
