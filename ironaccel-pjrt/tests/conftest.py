"""Fixtures: every discovered PJRT plugin, one client per plugin for the session.

Tests that take `plugin` or `client` run once per plugin that discovery
finds (the CPU plugins here, the CUDA plugin on the GPU machine).  A plugin
whose client cannot be created skips its tests with the reason, which
``IRONACCEL_REQUIRE=pjrt`` turns into a failure.

Plugins shipped as plain wheels without a ``jax_plugins``/``xla_plugins``
entry point (``lammps-jax-pjrt-cpu``, API 0.115) are named through
``IRONACCEL_PJRT_PLUGIN`` here, so that a second API version is exercised
and the env-var route is used for real.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

STANDALONE_PLUGINS = {"lammps_jax_pjrt_cpu": "pjrt_c_api_cpu_plugin.so"}


def _name_standalone_plugins() -> None:
    extra = []
    for module, filename in STANDALONE_PLUGINS.items():
        spec = importlib.util.find_spec(module)  # locates the package; runs none of it
        if spec is not None and spec.origin:
            path = Path(spec.origin).parent / filename
            if path.is_file():
                extra.append(str(path))
    if extra:
        current = [p for p in os.environ.get("IRONACCEL_PJRT_PLUGIN", "").split(os.pathsep) if p]
        os.environ["IRONACCEL_PJRT_PLUGIN"] = os.pathsep.join(current + [p for p in extra if p not in current])


_name_standalone_plugins()

from ironaccel_pjrt.client import Client  # noqa: E402 - after the env var is set
from ironaccel_pjrt.discovery import PluginLocation, discover  # noqa: E402

NO_PLUGIN = PluginLocation("none", "", "nothing discovered")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "plugin" in metafunc.fixturenames:
        plugins = discover() or [NO_PLUGIN]
        metafunc.parametrize("plugin", plugins, ids=[p.name for p in plugins], scope="session")


_clients: dict[str, Client | Exception] = {}


@pytest.fixture(scope="session")
def client(plugin: PluginLocation) -> Iterator[Client]:
    """The session's client of `plugin` (created once); skips with the reason if it cannot be made."""
    if plugin is NO_PLUGIN:
        pytest.skip("no PJRT plugin discovered: pip install xla-cpu-pjrt, or set IRONACCEL_PJRT_PLUGIN")
    made = _clients.get(plugin.path)
    if made is None:
        try:
            made = Client.create(plugin)
        except Exception as exc:
            made = exc
        _clients[plugin.path] = made
    if isinstance(made, Exception):
        pytest.skip(f"plugin {plugin.name}: {made}")
    yield made


@pytest.fixture
def fresh_client(plugin: PluginLocation) -> Iterator[Client]:
    """A private client, for tests that close it."""
    if plugin is NO_PLUGIN:
        pytest.skip("no PJRT plugin discovered")
    try:
        made = Client.create(plugin)
    except Exception as exc:
        pytest.skip(f"plugin {plugin.name}: {exc}")
    yield made
    made.close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for made in _clients.values():
        if isinstance(made, Client):
            made.close()
