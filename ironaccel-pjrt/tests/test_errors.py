"""Bad input gives typed errors naming the PJRT call, the code and the plugin's message; nothing leaks."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest

from ironaccel.errors import ClosedError, CompileError, DriverError, InvalidArgument, NotAvailable
from ironaccel_pjrt.backend import Backend
from ironaccel_pjrt.client import Client
from ironaccel_pjrt.options import CompileOptions

pytestmark = pytest.mark.backend("pjrt")

MUL_ADD = (Path(__file__).with_name("data") / "mul_add.mlir").read_text()  # a * b + c


def test_malformed_mlir_carries_the_compiler_message(client: Client) -> None:
    with pytest.raises(CompileError) as info:
        client.compile("func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> { return %nope : tensor<4xf32> }")
    err = info.value
    assert err.op == "PJRT_Client_Compile" and err.backend == "pjrt"
    assert err.code is not None and err.code_name and err.code_name != "OK"
    assert "error" in err.log and "undeclared" in err.log, err.log  # MLIR's own diagnostic, with line:column
    assert "1:" in err.log
    assert isinstance(err, DriverError)


def test_type_error_in_program(client: Client) -> None:
    bad = MUL_ADD.replace("%1 = stablehlo.add %0, %c : tensor<4xf32>", "%1 = stablehlo.add %0, %c : tensor<5xf32>")
    with pytest.raises(CompileError) as info:
        client.compile(bad)
    assert info.value.log.strip()


def test_program_that_is_not_a_program(client: Client) -> None:
    for junk in ("", "   ", b"\x00\x01garbage"):
        with pytest.raises((InvalidArgument, CompileError)) as info:
            client.compile(junk)
        assert info.value.op == "PJRT_Client_Compile"
    with pytest.raises(InvalidArgument):
        client.compile(42)  # type: ignore[arg-type]


def test_wrong_argument_count(client: Client) -> None:
    exe = client.compile(MUL_ADD)
    x = client.buffer_from_host(np.ones(4, np.float32))
    for args in ([x, x], [x, x, x, x], []):
        with pytest.raises(InvalidArgument) as info:
            exe.execute(args)
        assert info.value.op == "PJRT_LoadedExecutable_Execute"
        assert "takes 3 arguments" in info.value.detail, info.value.detail


def test_shape_and_dtype_mismatch(client: Client) -> None:
    exe = client.compile(MUL_ADD)
    assert [p.describe() for p in exe.parameters] == ["float32[4]"] * 3
    good = client.buffer_from_host(np.ones(4, np.float32))
    # f32[2,2] and i32[4] have the byte size of f32[4]: the XLA CPU plugin alone would run them.
    for wrong in (np.ones(5, np.float32), np.ones((2, 2), np.float32), np.ones(4, np.float64), np.ones(4, np.int32)):
        bad = client.buffer_from_host(wrong)
        with pytest.raises(InvalidArgument) as info:
            exe.execute([good, good, bad])
        assert info.value.op == "PJRT_LoadedExecutable_Execute"
        assert "argument 2" in info.value.detail and "float32[4]" in info.value.detail


def test_plugin_checks_what_it_cannot_be_told(client: Client) -> None:
    """With the signature unknown (as for bytecode), the plugin's own size check still raises, typed."""
    exe = client.compile(MUL_ADD, cache=False)
    exe.parameters = None
    good = client.buffer_from_host(np.ones(4, np.float32))
    with pytest.raises(InvalidArgument) as info:
        exe.execute([good, good, client.buffer_from_host(np.ones(5, np.float32))])
    assert info.value.code == 3 and info.value.code_name == "INVALID_ARGUMENT" and info.value.detail
    with pytest.raises(InvalidArgument) as info:
        exe.execute([good, good])
    assert info.value.code == 3


def test_argument_of_the_wrong_kind(client: Client) -> None:
    exe = client.compile(MUL_ADD)
    with pytest.raises(InvalidArgument, match="not a pjrt Buffer"):
        exe.execute([np.ones(4, np.float32)] * 3)  # type: ignore[list-item]
    with pytest.raises(InvalidArgument, match="argument lists"):
        exe.execute_sharded([])
    with pytest.raises(InvalidArgument, match="portable"):
        exe.execute([], device=client.devices[0])


def test_bad_compile_options(client: Client) -> None:
    for kwargs in ({"num_replicas": 0}, {"num_partitions": -1}, {"num_replicas": 2, "device_assignment": ((0,),)},
                   {"num_replicas": 2, "device_assignment": ((0,), (0,))},
                   {"portable": True, "device_assignment": ((0,),)}):
        with pytest.raises(InvalidArgument) as info:
            CompileOptions(**kwargs)  # type: ignore[arg-type]
        assert info.value.op == "PJRT_Client_Compile"
    with pytest.raises(DriverError) as err:  # a device id no client has
        client.compile(MUL_ADD, CompileOptions.for_devices([client.devices[0].id, 12345]))
    assert err.value.op == "PJRT_Client_Compile" and err.value.code is not None and err.value.detail
    with pytest.raises(InvalidArgument, match="no addressable device"):
        client.buffer_from_host(np.ones(2), device=10_000)


def test_client_creation_failure_is_reported(plugin) -> None:  # type: ignore[no-untyped-def]
    if not plugin.path:
        pytest.skip("no PJRT plugin discovered")
    try:
        made = Client.create(plugin, {"ironaccel_no_such_option": 1})
    except NotAvailable as exc:  # plugins from about API 0.9x validate option names
        assert exc.code == 3 and exc.code_name == "INVALID_ARGUMENT"
        assert "ironaccel_no_such_option" in exc.reason and plugin.name in exc.reason
    else:
        made.close()  # older plugins ignore unknown options


def test_backend_reports_a_failing_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IRONACCEL_PJRT_OPTIONS", "ironaccel_no_such_option=1")
    backend = Backend()
    try:
        devices = backend.devices()
    except NotAvailable as exc:  # every plugin refused: the reason lists each one
        assert "ironaccel_no_such_option" in exc.reason
        assert backend.failures()
    else:  # plugins that ignore the option still list devices; those that refused are reported
        assert devices
        for reason in backend.failures().values():
            assert "ironaccel_no_such_option" in reason
    finally:
        backend.close()


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_errors_and_buffers_do_not_leak(client: Client) -> None:
    exe = client.compile(MUL_ADD)
    good = client.buffer_from_host(np.ones(4, np.float32))
    bad = client.buffer_from_host(np.ones(7, np.float32))
    big = np.ones(1 << 16, np.float32)  # 256 KiB

    def churn(n: int) -> None:
        for _ in range(n):
            with pytest.raises(InvalidArgument):
                exe.execute([good, good, bad])
            with pytest.raises(CompileError):
                client.compile("not mlir", cache=False)
            b = client.buffer_from_host(big)
            b.to_host()
            b.delete()
            (out,) = exe.execute([good, good, good])
            out.to_host()

    tracked = len(client._buffers)
    churn(50)  # warm up allocator pools
    gc.collect()
    before = _rss()
    churn(400)
    gc.collect()
    grown = _rss() - before
    assert grown < 24 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 400 rounds"
    assert len(client._buffers) <= tracked + 1  # outputs were destroyed when dropped


def test_deleted_executable(client: Client) -> None:
    exe = client.compile(MUL_ADD, cache=False)
    x = client.buffer_from_host(np.ones(4, np.float32))
    exe.delete()
    exe.delete()
    with pytest.raises(ClosedError, match="executable is closed"):
        exe.execute([x, x, x])


def test_process_exits_cleanly_without_close(plugin, client: Client) -> None:  # type: ignore[no-untyped-def]
    """Clients left open (buffers, executables, a dropped client) are torn down at exit without a crash."""
    code = f"""
import gc, numpy as np
from ironaccel_pjrt.client import Client
from ironaccel_pjrt.discovery import PluginLocation
plugin = PluginLocation({plugin.name!r}, {plugin.path!r}, "test")
dropped = Client.create(plugin)
dropped.buffer_from_host(np.ones(3))
del dropped
gc.collect()
kept = Client.create(plugin)
exe = kept.compile('''{MUL_ADD}''')
x = kept.buffer_from_host(np.ones(4, np.float32))
out = exe.execute([x, x, x])
print("done", out[0].to_host().tolist())
"""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "done [2.0, 2.0, 2.0, 2.0]" in result.stdout


def test_garbage_collected_buffers_mid_call(client: Client) -> None:
    """Buffers freed by the cycle collector (their __del__ runs inside other calls) never corrupt a call."""
    exe = client.compile(MUL_ADD)
    x = np.arange(4, dtype=np.float32)
    threshold = gc.get_threshold()
    gc.set_threshold(1, 1, 1)  # collect at almost every allocation
    try:
        for i in range(300):
            holder: dict = {}
            holder["self"] = holder  # a cycle: only the collector frees it, at an arbitrary point
            holder["buffers"] = [client.buffer_from_host(x + i), client.buffer_from_host(x)]
            a = client.buffer_from_host(x + i)
            (out,) = exe.execute([a, a, a])
            np.testing.assert_array_equal(out.to_host(), (x + i) * (x + i) + (x + i))
            out.delete()
    finally:
        gc.set_threshold(*threshold)
        gc.collect()
