"""What only the CPU plugins (several devices, a device-count option) can show.

Not marked for the pjrt backend: on a machine whose only plugin is a GPU one,
these skip instead of failing under IRONACCEL_REQUIRE=pjrt.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ironaccel.errors import InvalidArgument
from ironaccel_pjrt.client import Client
from ironaccel_pjrt.discovery import PluginLocation
from ironaccel_pjrt.options import CompileOptions

MUL_ADD = (Path(__file__).with_name("data") / "mul_add.mlir").read_text()  # a * b + c


def _cpu(client: Client) -> None:
    if client.platform_name != "cpu":
        pytest.skip(f"{client.plugin.name} is a {client.platform_name} plugin")


def test_cpu_device_count_option(plugin: PluginLocation, client: Client) -> None:
    _cpu(client)
    with Client.create(plugin, {"cpu_device_count": 2}) as two:
        assert len(two.devices) == 2
        assert [d.id for d in two.devices] == [0, 1]


def test_argument_on_another_device(client: Client) -> None:
    _cpu(client)
    exe = client.compile(MUL_ADD, CompileOptions.for_devices([client.devices[0].id]))
    elsewhere = client.buffer_from_host(np.ones(4, np.float32), client.devices[1])
    try:
        (out,) = exe.execute([elsewhere] * 3)
    except InvalidArgument as exc:  # the plugin refuses it...
        assert exc.op == "PJRT_LoadedExecutable_Execute" and exc.code == 3
    else:  # ...or copies it over: either way the answer is right
        np.testing.assert_allclose(out.to_host(), np.full(4, 2, np.float32))
