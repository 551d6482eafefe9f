"""Bad input that used to abort the process or escape untyped (issue 9), run against every plugin.

Client creation with a wrongly typed option aborted inside PJRT_Client_Create on older plugins
(std::bad_variant_access), so those cases run in a child process: a regression shows as a dead
child, not a dead test run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ironaccel.errors import InvalidArgument, OutOfMemory
from ironaccel_pjrt.client import Client
from ironaccel_pjrt.discovery import PluginLocation


def _create_in_child(plugin: PluginLocation, options: str, env: dict[str, str] | None = None) -> str:
    code = textwrap.dedent(f"""
        from ironaccel_pjrt.client import Client
        from ironaccel_pjrt.discovery import PluginLocation
        plugin = PluginLocation({plugin.name!r}, {plugin.path!r}, "test")
        try:
            client = Client.create(plugin, {options})
        except Exception as exc:
            print(type(exc).__name__, "|", exc.op, "|", exc)
        else:
            print("created", len(client.devices))
            client.close()
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, f"the child died ({proc.returncode}): {proc.stderr[-2000:]}"
    return proc.stdout.strip()


@pytest.mark.parametrize("value", ['"two"', "2.5", "True", "[2]"])
def test_option_of_the_wrong_type_is_refused_before_the_plugin(plugin: PluginLocation, value: str) -> None:
    if not plugin.path:
        pytest.skip("no PJRT plugin discovered")
    out = _create_in_child(plugin, f"{{'cpu_device_count': {value}}}")
    assert out.startswith("InvalidArgument | PJRT_Client_Create |"), out
    assert "cpu_device_count" in out and "an int64" in out


@pytest.mark.parametrize("text", ["abc", "2.5"])
def test_environment_option_of_the_wrong_type_is_refused(plugin: PluginLocation, text: str) -> None:
    if not plugin.path:
        pytest.skip("no PJRT plugin discovered")
    out = _create_in_child(plugin, "None", env={"IRONACCEL_PJRT_OPTIONS": f"cpu_device_count={text}"})
    assert out.startswith("InvalidArgument | PJRT_Client_Create |"), out
    assert f"IRONACCEL_PJRT_OPTIONS: cpu_device_count={text!r}" in out


def test_environment_option_of_the_right_type_still_works(plugin: PluginLocation, client: Client) -> None:
    if client.platform_name != "cpu":
        pytest.skip(f"{plugin.name} is a {client.platform_name} plugin")
    assert _create_in_child(plugin, "None", env={"IRONACCEL_PJRT_OPTIONS": "cpu_device_count=3"}) == "created 3"


@pytest.mark.parametrize("options", [{"cpu_device_count": 1 << 70}, {"ironaccel_unknown": -(1 << 64)},
                                     {"ironaccel_unknown": [1, 1 << 63]}, {"ironaccel_unknown": float("inf")},
                                     {"ironaccel_unknown": 1e39}])
def test_values_that_do_not_fit_are_refused_not_wrapped(plugin: PluginLocation, options: dict) -> None:
    if not plugin.path:
        pytest.skip("no PJRT plugin discovered")
    with pytest.raises(InvalidArgument) as info:
        Client.create(plugin, options)
    assert info.value.op == "PJRT_Client_Create" and str(next(iter(options))) in str(info.value)


def test_check_options_types() -> None:
    from ironaccel_pjrt.client import check_options

    assert check_options({"memory_fraction": 1, "visible_devices": (0, 1), "other": "x"}) == {
        "memory_fraction": 1.0, "visible_devices": (0, 1), "other": "x"}
    for bad in ({"preallocate": 1}, {"platform_name": 3}, {"visible_devices": [True]}, {"node_id": 1.0}):
        with pytest.raises(InvalidArgument):
            check_options(bad)
    with pytest.raises(InvalidArgument, match="mapping"):
        Client.create(PluginLocation("x", "/nonexistent.so", "test"), [("cpu_device_count", 2)])  # type: ignore[arg-type]


@pytest.mark.parametrize("nbytes", [1 << 40, 1 << 48], ids=["1TiB", "256TiB"])
def test_huge_upload_is_out_of_memory_naming_the_call(client: Client, nbytes: int) -> None:
    if nbytes < 1 << 47 and open("/proc/sys/vm/overcommit_memory").read().strip() == "1":
        pytest.skip("with vm.overcommit_memory=1 a 1 TiB host copy may be granted and then fill the machine")
    huge = np.broadcast_to(np.float32(1), (nbytes // 4,))  # a view: no memory behind it
    with pytest.raises(OutOfMemory) as info:
        client.buffer_from_host(huge)
    assert info.value.op == "PJRT_Client_BufferFromHostBuffer" and isinstance(info.value, MemoryError)
