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


# -- arguments that let a raw TypeError, ValueError, AttributeError or UnicodeEncodeError out ------------------

IDENTITY = """func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}"""


@pytest.mark.parametrize("array", [[[1, 2], [3]], [1, [2, 3]]], ids=["ragged", "nested"])
def test_an_upload_numpy_cannot_hold_is_invalid_argument(client: Client, array: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        client.buffer_from_host(array)
    assert info.value.op == "PJRT_Client_BufferFromHostBuffer" and "not an array numpy can hold" in str(info.value)


@pytest.mark.parametrize("memory", [[], {}, 5])
def test_an_upload_memory_that_is_not_a_kind_is_invalid_argument(client: Client, memory: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        client.buffer_from_host(np.zeros(4, np.float32), memory=memory)  # type: ignore[arg-type]
    assert info.value.op == "PJRT_Client_BufferFromHostBuffer" and "memory must be a memory kind" in str(info.value)


@pytest.mark.parametrize("target", [None, 0, "cpu"])
def test_copy_to_something_not_a_device_is_invalid_argument(client: Client, target: object) -> None:
    buffer = client.buffer_from_host(np.zeros(4, np.float32))
    try:
        with pytest.raises(InvalidArgument) as info:
            buffer.copy_to(target)  # type: ignore[arg-type]
        assert info.value.op == "PJRT_Buffer_CopyToDevice" and type(target).__name__ in str(info.value)
    finally:
        buffer.delete()


def test_program_text_with_a_lone_surrogate_is_invalid_argument(client: Client) -> None:
    with pytest.raises(InvalidArgument) as info:
        client.compile(IDENTITY + "// \ud800\n")
    assert info.value.op == "PJRT_Client_Compile" and "lone surrogate" in str(info.value)


@pytest.mark.parametrize("fmt", [None, 5, "", "ml\udcffir"])
def test_a_format_that_is_not_a_name_is_invalid_argument(client: Client, fmt: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        client.compile(IDENTITY, format=fmt)  # type: ignore[arg-type]
    assert info.value.op == "PJRT_Client_Compile" and "format must be" in str(info.value)


@pytest.mark.parametrize("args", [None, 5, "ab"])
def test_execute_arguments_that_are_not_a_list_are_invalid_argument(client: Client, args: object) -> None:
    from ironaccel_pjrt.backend import describe
    from ironaccel_pjrt.device import PjrtDevice

    executable = client.compile(IDENTITY)
    device = PjrtDevice(describe(0, client.devices[0]), client.devices[0])
    for run in (lambda: executable.execute(args), lambda: executable.execute_sharded(args),  # type: ignore[arg-type]
                lambda: executable.execute_sharded([args]), lambda: device.execute(executable, args)):  # type: ignore[arg-type, list-item]
        with pytest.raises(InvalidArgument) as info:
            run()
        assert info.value.op == "PJRT_LoadedExecutable_Execute" and "must be a list or tuple" in str(info.value)
    x = client.buffer_from_host(np.arange(4, dtype=np.float32))  # a tuple, and the client, still work
    (y,) = device.execute(executable, (x,))
    np.testing.assert_array_equal(y.to_host(), np.arange(4, dtype=np.float32))
    for b in (x, y):
        b.delete()


@pytest.mark.parametrize("ids", [None, ["a"], [1.5], [None], [True], [1 << 70]])
def test_device_ids_that_are_not_int64_are_invalid_argument(ids: object) -> None:
    from ironaccel_pjrt import CompileOptions

    with pytest.raises(InvalidArgument) as info:
        CompileOptions.for_devices(ids)  # type: ignore[arg-type]
    assert info.value.op == "PJRT_Client_Compile"
    with pytest.raises(InvalidArgument):
        CompileOptions(device_assignment=5 if ids is None else [ids])  # type: ignore[arg-type]
    assert CompileOptions.for_devices([np.int64(0)]).device_assignment == ((0,),)


def test_replica_counts_past_int64_are_refused_before_the_plugin() -> None:
    from ironaccel_pjrt import CompileOptions

    with pytest.raises(InvalidArgument, match="num_replicas must be a positive int64"):
        CompileOptions(num_replicas=1 << 63)  # serialized, it read "failed to deserialize CompileOptionsProto"
