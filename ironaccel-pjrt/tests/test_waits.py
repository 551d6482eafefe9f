"""The upload's unawaited done_with_host_buffer event and the poll-before-block wait (`Client.spin`)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from ironaccel.errors import InvalidArgument
from ironaccel_pjrt import capi
from ironaccel_pjrt import client as client_module
from ironaccel_pjrt.client import CPU_SPIN_US, ENV_SPIN, Client, spin_seconds

pytestmark = pytest.mark.backend("pjrt")

UPLOAD = "PJRT_Client_BufferFromHostBuffer"
UPLOAD_ARGS = capi.STRUCTS["PJRT_Client_BufferFromHostBuffer_Args"]
EVENT_DESTROY_ARGS = capi.STRUCTS["PJRT_Event_Destroy_Args"]

MUL_ADD = (Path(__file__).with_name("data") / "mul_add.mlir").read_text().replace("<4xf32>", "<1024xf32>")  # a * b + c


@pytest.mark.parametrize("n", [4, 1 << 20])  # below and above the XLA CPU client's small-transfer size
def test_the_source_may_change_and_go_as_soon_as_the_upload_returns(client: Client, n: int) -> None:
    expected = np.arange(n, dtype=np.float32)
    source = expected.copy()
    buffer = client.buffer_from_host(source)
    source[:] = -1.0  # the upload is not awaited: only a copy made during the call survives this
    del source
    np.testing.assert_array_equal(buffer.to_host(), expected)
    buffer.delete()


def test_every_upload_event_is_destroyed(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    api = client.api
    upload, destroy = api.function(UPLOAD), api._event_destroy
    made: list[int] = []
    destroyed: list[int] = []

    def counting_upload(address: int) -> int:
        error = upload(address)
        made.append(UPLOAD_ARGS.from_address(address).done_with_host_buffer or 0)
        return error

    def counting_destroy(address: int) -> int:
        destroyed.append(EVENT_DESTROY_ARGS.from_address(address).event or 0)
        return destroy(address)

    monkeypatch.setitem(api._functions, UPLOAD, counting_upload)
    monkeypatch.setattr(api, "_event_destroy", counting_destroy)
    buffers = [client.buffer_from_host(np.full(16, i, np.float32)) for i in range(20)]
    events = [e for e in made if e]
    assert len(made) == 20
    assert events and set(events) <= set(destroyed), "a done_with_host_buffer event was left undestroyed"
    for i, buffer in enumerate(buffers):
        np.testing.assert_array_equal(buffer.to_host(), np.full(16, i, np.float32))
        buffer.delete()


@pytest.mark.parametrize("spin", [0.0, 0.01])
def test_waits_give_the_result_whether_they_poll_or_block(client: Client, monkeypatch: pytest.MonkeyPatch,
                                                          spin: float) -> None:
    api = client.api
    monkeypatch.setattr(client, "spin", spin)
    polls = []
    is_ready = api.function("PJRT_Event_IsReady")

    def counting_is_ready(address: int) -> int:
        polls.append(address)
        return is_ready(address)

    monkeypatch.setitem(api._functions, "PJRT_Event_IsReady", counting_is_ready)
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(1024).astype(np.float32) for _ in range(3))
    exe = client.compile(MUL_ADD)
    for _ in range(20):
        (out,) = exe.execute([client.buffer_from_host(x) for x in (a, b, c)])
        assert out.block_until_ready() is out
        np.testing.assert_allclose(out.to_host(), a.astype(np.float64) * b + c, rtol=1e-6, atol=1e-6)
        out.delete()
    assert bool(polls) == (spin > 0)


def test_the_spin_gives_up_at_its_deadline(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    api = client.api
    calls = []

    def never_ready(address: int) -> int:  # touches no event: the fake one below never reaches the plugin
        calls.append(address)
        return 0

    monkeypatch.setitem(api._functions, "PJRT_Event_IsReady", never_ready)
    start = time.perf_counter()
    api._spin("PJRT_Buffer_ReadyEvent", 0xDEAD0, 0.002)
    took = time.perf_counter() - start
    assert calls and 0.002 <= took < 0.5


def test_spin_time_from_the_platform_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_SPIN, raising=False)
    monkeypatch.setattr(client_module, "_usable_cores", lambda: 2)
    assert spin_seconds("cpu") == pytest.approx(CPU_SPIN_US * 1e-6)
    assert spin_seconds("cuda") == 0.0
    monkeypatch.setattr(client_module, "_usable_cores", lambda: 1)
    assert spin_seconds("cpu") == 0.0  # polling would take the one core from the worker it waits for
    monkeypatch.setenv(ENV_SPIN, "50")
    assert spin_seconds("cuda") == pytest.approx(50e-6)
    monkeypatch.setenv(ENV_SPIN, "0")
    assert spin_seconds("cpu") == 0.0
    for bad in ("fast", "-1", "nan", "inf"):
        monkeypatch.setenv(ENV_SPIN, bad)
        with pytest.raises(InvalidArgument, match=ENV_SPIN) as info:
            spin_seconds("cpu")
        assert info.value.op == "PJRT_Client_Create"
