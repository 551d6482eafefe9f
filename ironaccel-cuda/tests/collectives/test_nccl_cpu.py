"""ironaccel_cuda.nccl without a GPU: dtype and reduction mapping, typed errors, what is missing, the rendezvous."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from ironaccel import DriverError, DType, InvalidArgument, InvalidState, NotAvailable, OutOfMemory, Unsupported
from ironaccel_cuda.nccl import _binding, _rendezvous
from ironaccel_cuda.nccl._binding import CollectiveTimeout, movement_type, nccl_error, reduce_op, reduction_type


def test_import_loads_nothing():
    code = textwrap.dedent(
        """
        import sys
        from ironaccel_cuda import nccl
        assert "Communicator" in nccl.__all__ and nccl.DEFAULT_TIMEOUT > 0
        loaded = [m for m in sys.modules if m.split(".")[0] in ("nccl", "cuda")]
        assert not loaded, loaded
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize(("dtype", "code"), [
    ("int8", 0), ("uint8", 1), ("int32", 2), ("uint32", 3), ("int64", 4), ("uint64", 5), ("float16", 6),
    ("float32", 7), ("float64", 8), ("bfloat16", 9),
])
def test_native_types(dtype, code):
    for op in ("sum", "prod", "max", "min", "avg"):
        assert reduction_type(DType(dtype), op, "ncclAllReduce") == (code, 1)
    assert movement_type(DType(dtype)) == (code, 1)


def test_complex_numbers_reduce_componentwise_for_sum_and_avg():
    assert reduction_type(DType.COMPLEX64, "sum", "ncclAllReduce") == (7, 2)
    assert reduction_type(DType.COMPLEX128, "avg", "ncclReduce") == (8, 2)
    for op in ("prod", "max", "min"):
        with pytest.raises(InvalidArgument) as info:
            reduction_type(DType.COMPLEX64, op, "ncclReduceScatter")
        assert info.value.op == "ncclReduceScatter" and op in str(info.value)


@pytest.mark.parametrize("dtype", ["bool", "int16", "uint16"])
def test_types_nccl_cannot_reduce_move_as_bytes(dtype):
    with pytest.raises(InvalidArgument) as info:
        reduction_type(DType(dtype), "sum", "ncclAllReduce")
    assert info.value.op == "ncclAllReduce" and dtype in str(info.value) and "float32" in str(info.value)
    assert movement_type(DType(dtype)) == (1, DType(dtype).itemsize)  # ncclUint8 x itemsize
    assert movement_type(DType.COMPLEX128) == (1, 16)


def test_reduction_names():
    from ironaccel_cuda.nccl import ReduceOp

    assert [reduce_op(name, "x")[1] for name in ("sum", "prod", "max", "min", "avg")] == [0, 1, 2, 3, 4]
    assert reduce_op(ReduceOp.AVG, "x") == ("avg", 4)
    for bad in ("mean", "SUM", None, 0, ReduceOp):
        with pytest.raises(InvalidArgument) as info:
            reduce_op(bad, "ncclReduce")
        assert info.value.op == "ncclReduce"


@pytest.mark.parametrize(("code", "kind", "name"), [
    (1, DriverError, "ncclUnhandledCudaError"), (2, DriverError, "ncclSystemError"),
    (3, DriverError, "ncclInternalError"), (4, InvalidArgument, "ncclInvalidArgument"),
    (5, InvalidState, "ncclInvalidUsage"), (6, DriverError, "ncclRemoteError"), (8, CollectiveTimeout, "ncclTimeout"),
    (42, DriverError, "ncclResult 42"),
])
def test_results_become_typed_errors(code, kind, name, monkeypatch):
    from ironaccel_cuda.nccl import _binding

    # the library's last-error text is process-wide: an earlier test's out of memory must not decide this one
    monkeypatch.setattr(_binding, "_strings", lambda code, comm: (None, None))
    err = nccl_error("ncclAllReduce", code)
    assert type(err) is kind and isinstance(err, DriverError)
    assert (err.backend, err.op, err.code, err.code_name) == ("cuda", "ncclAllReduce", code, name)
    assert str(err).startswith(f"cuda: ncclAllReduce: {name} ({code})")


def test_a_cuda_out_of_memory_inside_nccl_is_out_of_memory(monkeypatch):
    class FakeBinding:
        class Comm:
            def __init__(self, handle):
                pass

        @staticmethod
        def get_error_string(code):
            return "unhandled cuda error"

        @staticmethod
        def get_last_error(comm):
            return "Cuda failure 2 'out of memory'"

    monkeypatch.setattr(_binding, "_nb", FakeBinding)
    err = nccl_error("ncclMemAlloc", 1)
    assert isinstance(err, OutOfMemory) and isinstance(err, MemoryError)
    assert "out of memory" in str(err) and "unhandled cuda error" in str(err)
    assert type(nccl_error("ncclMemAlloc", 2)) is DriverError


def test_timeouts_are_timeout_errors():
    err = CollectiveTimeout("cuda", "Communicator.synchronize", detail="no progress")
    assert isinstance(err, TimeoutError) and isinstance(err, DriverError) and "no progress" in str(err)


def test_binding_exceptions_are_translated():
    class FunctionNotFoundError(RuntimeError):
        pass

    assert isinstance(_binding.translate("ncclCommShrink", FunctionNotFoundError("gone")), Unsupported)
    bad = _binding.translate("ncclAllReduce", TypeError("Cannot convert str to int"))
    assert isinstance(bad, InvalidArgument) and bad.op == "ncclAllReduce"
    other = _binding.translate("ncclSend", RuntimeError("boom"))
    assert type(other) is DriverError and "boom" in str(other)
    mine = InvalidState("cuda", "x", detail="y")
    assert _binding.translate("z", mine) is mine


def test_missing_nccl4py_names_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "nccl.bindings.nccl", None)  # import raises ImportError
    monkeypatch.setattr(_binding, "_nb", None)
    monkeypatch.setattr(_binding, "_failure", None)
    from ironaccel_cuda import nccl

    for _ in range(2):  # the second call re-raises the remembered failure
        with pytest.raises(NotAvailable) as info:
            nccl.version()
        assert "nccl4py" in info.value.reason and "ironaccel-cuda[nccl]" in (info.value.fix or "")
    with pytest.raises(NotAvailable):
        nccl.UniqueId.new()


def test_missing_libnccl_names_what_to_install(monkeypatch):
    pytest.importorskip("nccl.bindings.nccl", reason="nccl4py is not installed")
    monkeypatch.setattr(_binding, "_nb", None)
    monkeypatch.setattr(_binding, "_failure", None)
    from ironaccel_cuda import nccl

    try:
        found = nccl.version()
    except NotAvailable as exc:  # CI installs nccl4py but not the 300 MB nvidia-nccl-cu13
        assert exc.library == "libnccl.so.2" and "nvidia-nccl-cu13" in (exc.fix or "")
        assert "libnccl.so.2" in exc.reason
        with pytest.raises(NotAvailable) as again:
            nccl.group()
        assert again.value.library == "libnccl.so.2"
    else:
        assert len(found) == 3 and found >= (2, 18, 0)


# -- the rendezvous -----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ask_all(ranks, world, port, payload, timeout=20.0, tag=0, host="127.0.0.1"):
    """Rank 0 serves in this thread; the other ranks ask from threads; returns {rank: bytes or exception}."""
    results: dict[int, object] = {}

    def ask(rank: int) -> None:
        try:
            results[rank] = _rendezvous.exchange(None, rank=rank, world=world, host=host, port=port, timeout=timeout,
                                                 tag=tag)
        except Exception as exc:
            results[rank] = exc

    threads = [threading.Thread(target=ask, args=(r,)) for r in ranks]
    for t in threads:
        t.start()
    return results, threads


def test_rank_zero_hands_the_id_to_every_rank():
    port, payload = _free_port(), bytes(range(128))
    results, threads = _ask_all([3, 1, 2], 4, port, payload)
    time.sleep(0.2)  # the others start first and retry until rank 0 listens
    assert _rendezvous.exchange(payload, rank=0, world=4, host="127.0.0.1", port=port, timeout=20) == payload
    for t in threads:
        t.join(20)
    assert results == {1: payload, 2: payload, 3: payload}


def test_one_rank_needs_no_network():
    assert _rendezvous.exchange(bytes(128), rank=0, world=1, host="unused", port=0, timeout=1) == bytes(128)


def test_no_rank_zero_times_out():
    start = time.monotonic()
    with pytest.raises(CollectiveTimeout) as info:
        _rendezvous.exchange(None, rank=1, world=2, host="127.0.0.1", port=_free_port(), timeout=0.5)
    assert 0.5 <= time.monotonic() - start < 5 and info.value.op == "rendezvous"
    assert "found no rank 0" in str(info.value)


def test_missing_ranks_time_out_on_rank_zero():
    port = _free_port()
    results, threads = _ask_all([2], 4, port, None)
    start = time.monotonic()
    with pytest.raises(CollectiveTimeout) as info:
        _rendezvous.exchange(bytes(128), rank=0, world=4, host="127.0.0.1", port=port, timeout=1.0)
    assert 1.0 <= time.monotonic() - start < 6
    assert "[1, 3] never asked" in str(info.value)
    for t in threads:
        t.join(20)
    assert results[2] == bytes(128)


@pytest.mark.parametrize(("world", "rank", "tag", "text"), [
    (3, 1, 0, "another WORLD_SIZE"), (2, 1, 7, "another rendezvous"),
])
def test_mismatched_ranks_are_told_why(world, rank, tag, text):
    port = _free_port()
    results, threads = _ask_all([rank], world, port, None, timeout=10, tag=tag)
    with pytest.raises(CollectiveTimeout):
        _rendezvous.exchange(bytes(128), rank=0, world=2, host="127.0.0.1", port=port, timeout=1.5)
    for t in threads:
        t.join(20)
    err = results[rank]
    assert isinstance(err, InvalidArgument) and text in str(err), err


def test_a_duplicate_rank_is_refused_and_strangers_are_ignored():
    port, payload = _free_port(), b"\x07" * 128
    server = threading.Thread(target=_rendezvous.exchange, args=(payload,),
                              kwargs={"rank": 0, "world": 3, "host": "127.0.0.1", "port": port, "timeout": 20})
    server.start()
    time.sleep(0.2)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as stranger:  # speaks something else
        stranger.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 64)
        try:
            answer = stranger.recv(16)
        except ConnectionResetError:  # closed with our bytes unread
            answer = b""
        assert answer == b""  # dropped without an answer
    assert _rendezvous.exchange(None, rank=1, world=3, host="127.0.0.1", port=port, timeout=10) == payload
    with pytest.raises(InvalidArgument, match="already asked"):
        _rendezvous.exchange(None, rank=1, world=3, host="127.0.0.1", port=port, timeout=10)
    assert _rendezvous.exchange(None, rank=2, world=3, host="127.0.0.1", port=port, timeout=10) == payload
    server.join(20)
    assert not server.is_alive()


def test_a_busy_port_is_reported():
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(InvalidArgument, match="cannot listen"):
            _rendezvous.exchange(bytes(128), rank=0, world=2, host="127.0.0.1", port=port, timeout=1)


def test_rank_zero_must_bring_the_id():
    with pytest.raises(InvalidArgument):
        _rendezvous.exchange(b"short", rank=0, world=2, host="127.0.0.1", port=1, timeout=1)


# -- the benchmark's arithmetic and report (bench/bench_nccl.py; the measuring needs GPUs) ----------


def _bench():
    from pathlib import Path

    bench = str(Path(__file__).resolve().parents[2] / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import bench_nccl

    return bench_nccl


def test_bus_bandwidth_factors_are_nccl_tests():
    b = _bench()
    assert b.bus_factor("all_reduce", 8) == 2 * 7 / 8 and b.bus_factor("all_reduce", 1) == 0
    assert b.bus_factor("all_gather", 4) == 3 / 4 == b.bus_factor("reduce_scatter", 4)
    assert b.bus_factor("broadcast", 8) == 1 == b.bus_factor("reduce", 2)


def test_bench_report_judges_the_target(capsys, tmp_path):
    import argparse
    import json

    import numpy as np

    b = _bench()
    rng = np.random.default_rng(0)

    def row(collective, nbytes, torch_ratio, noise=0.0):
        ia = 1e6 * (1 + 0.01 * rng.standard_normal(12))
        torch = ia * torch_ratio * (1 + noise * rng.standard_normal(12))
        ns = np.stack([ia, ia * 0.9, torch], axis=1)
        return {"title": f"{collective} {b.human(nbytes)}", "labels": ["ironaccel", "ironaccel+reg", "torch"], "k": 3,
                "ns": ns, "kind": "bandwidth", "collective": collective, "bytes": nbytes}

    overhead = {"title": "call overhead, 8 B all_reduce", "labels": ["ironaccel", "nccl4py", "torch"], "k": 512,
                "ns": np.tile([1000.0, 300.0, 9000.0], (12, 1)), "kind": "overhead", "bytes": 8}
    rows = [overhead, row("all_reduce", 1 << 30, 1.0), row("all_gather", 1 << 20, 0.80),
            row("broadcast", 1 << 24, 1 / 1.05, noise=0.05)]
    out = tmp_path / "n.json"
    b.report(rows, {"device": "X", "world": 2}, 2, argparse.Namespace(json=str(out)))
    text = capsys.readouterr().out
    lines = {line.split(" |")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert lines["all_reduce 1 GiB"].endswith("| PASS |") and lines["all_gather 1 MiB"].endswith("| FAIL |")
    assert lines["broadcast 16 MiB"].endswith("| unresolved |")
    # all_reduce 1 GiB at about 1 ms a call on 2 ranks: 2^30 B x 2(n-1)/n / 1e6 ns = 1073.7 GB/s
    cells = lines["all_reduce 1 GiB"].split("|")
    assert abs(float(cells[2]) - 1073.7) < 15 and "1.111x" in cells[6]
    assert "| nccl4py | 300 | 0.30x" in text and "| torch | 9,000 | 9.00x" in text
    assert "1 PASS, 1 FAIL, 1 unresolved of 3" in text and "needs 2+ GPUs" not in text
    assert len(json.loads(out.read_text())["rows"]) == 4
    b.report([overhead], {"device": "X"}, 1, argparse.Namespace(json=None))
    assert "needs 2+ GPUs" in capsys.readouterr().out
