"""Compile StableHLO (text and bytecode) and execute on one device or several, checked against numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ironaccel_pjrt.client import Client
from ironaccel_pjrt.options import CompileOptions

pytestmark = pytest.mark.backend("pjrt")

DATA = Path(__file__).with_name("data")
MLIR_TYPES = {np.float32: "f32", np.float64: "f64", np.int32: "i32"}


def mul_add(shape: tuple[int, ...], dtype: type) -> str:
    t = f"tensor<{'x'.join(map(str, shape))}x{MLIR_TYPES[dtype]}>"
    return f"""
func.func public @main(%a: {t}, %b: {t}, %c: {t}) -> {t} {{
  %0 = stablehlo.multiply %a, %b : {t}
  %1 = stablehlo.add %0, %c : {t}
  return %1 : {t}
}}
"""


def dot(m: int, k: int, n: int) -> str:
    return f"""
func.func public @main(%a: tensor<{m}x{k}xf32>, %b: tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32> {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %0 : tensor<{m}x{n}xf32>
}}
"""


SUM_AND_MAX = """
func.func public @main(%a: tensor<5x7xf64>) -> (tensor<7xf64>, tensor<f64>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f64>
  %ninf = stablehlo.constant dense<0xFFF0000000000000> : tensor<f64>
  %sum = stablehlo.reduce(%a init: %zero) applies stablehlo.add across dimensions = [0]
      : (tensor<5x7xf64>, tensor<f64>) -> tensor<7xf64>
  %max = stablehlo.reduce(%a init: %ninf) applies stablehlo.maximum across dimensions = [0, 1]
      : (tensor<5x7xf64>, tensor<f64>) -> tensor<f64>
  return %sum, %max : tensor<7xf64>, tensor<f64>
}
"""


def all_reduce(n: int, replicas: int) -> str:
    group = ", ".join(map(str, range(replicas)))
    return f"""
func.func public @main(%a: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %0 = "stablehlo.all_reduce"(%a) ({{
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }}) {{replica_groups = dense<[[{group}]]> : tensor<1x{replicas}xi64>}} : (tensor<{n}xf32>) -> tensor<{n}xf32>
  return %0 : tensor<{n}xf32>
}}
"""


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_multiply_add_matches_numpy(client: Client, dtype: type) -> None:
    rng = np.random.default_rng()
    shape = (33, 17)
    exe = client.compile(mul_add(shape, dtype))
    assert exe.num_outputs == 1 and exe.output_shapes == [shape] and exe.output_dtypes[0].numpy == np.dtype(dtype)
    for _ in range(3):
        if dtype is np.int32:
            a, b, c = (rng.integers(-1000, 1000, shape).astype(dtype) for _ in range(3))
        else:
            a, b, c = (rng.standard_normal(shape).astype(dtype) for _ in range(3))
        (out,) = exe.execute([client.buffer_from_host(x) for x in (a, b, c)])
        assert out.shape == shape and out.placement() is exe.devices[0]
        if dtype is np.int32:
            np.testing.assert_array_equal(out.to_host(), a * b + c)
        else:  # XLA may fuse into one FMA (one rounding): compare with the exact result
            tol = 1e-6 if dtype is np.float32 else 1e-13
            exact = a.astype(np.float64) * b + c
            np.testing.assert_allclose(out.to_host(), exact, rtol=tol, atol=tol)


def test_dot_matches_numpy(client: Client) -> None:
    rng = np.random.default_rng()
    m, k, n = 64, 48, 24
    exe = client.compile(dot(m, k, n))
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    (out,) = exe.execute([client.buffer_from_host(a), client.buffer_from_host(b)])
    # TF32 on tensor-core GPUs rounds inputs to 10 mantissa bits: allow for it.
    rtol = 1e-4 if client.platform_name == "cpu" else 5e-3
    np.testing.assert_allclose(out.to_host(), a.astype(np.float64) @ b, rtol=rtol, atol=rtol * np.sqrt(k))


def test_multiple_outputs(client: Client) -> None:
    a = np.random.default_rng().standard_normal((5, 7))
    exe = client.compile(SUM_AND_MAX)
    assert exe.output_shapes == [(7,), ()]
    total, largest = exe.execute([client.buffer_from_host(a)])
    np.testing.assert_allclose(total.to_host(), a.sum(axis=0), rtol=1e-12)
    assert largest.to_host() == a.max()


def test_outputs_feed_the_next_execution(client: Client) -> None:
    exe = client.compile(mul_add((256,), np.float32))
    x = np.random.default_rng().standard_normal(256).astype(np.float32)
    two = client.buffer_from_host(np.full(256, 2, np.float32))
    one = client.buffer_from_host(np.ones(256, np.float32))
    buf, expected = client.buffer_from_host(x), x.copy()
    for _ in range(5):  # x <- 2x + 1, never leaving the device
        (buf,) = exe.execute([buf, two, one])
        expected = expected * 2 + 1
    np.testing.assert_allclose(buf.to_host(), expected, rtol=1e-6, atol=1e-5)


def test_stablehlo_bytecode(client: Client) -> None:
    code = (DATA / "squared_difference.mlirbc").read_bytes()
    assert code.startswith(b"ML\xefR")
    exe = client.compile(code)
    rng = np.random.default_rng()
    a, b = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    (out,) = exe.execute([client.buffer_from_host(a), client.buffer_from_host(b)])
    np.testing.assert_allclose(out.to_host(), (a - b) ** 2, rtol=1e-6)


def test_executable_cache(client: Client) -> None:
    code = mul_add((3,), np.float32)
    first = client.compile(code)
    assert client.compile(code) is first
    assert client.compile(code.encode()) is first  # text as str or bytes is one program
    pinned = client.compile(code, CompileOptions.for_devices([client.devices[-1].id]))
    assert pinned is client.compile(code, CompileOptions.for_devices([client.devices[-1].id]))
    assert pinned.devices == [client.devices[-1]]  # options are part of the key: a distinct entry
    assert client.compile(code, cache=False) is not first
    first.delete()
    again = client.compile(code)
    assert again is not first and not again.closed  # a deleted executable is recompiled, not returned


def test_execute_on_a_chosen_device(client: Client) -> None:
    code = mul_add((16,), np.float32)
    rng = np.random.default_rng()
    portable = client.compile(code, CompileOptions(portable=True))
    for device in client.devices:
        pinned = client.compile(code, CompileOptions.for_devices([device.id]))
        assert pinned.devices == [device]
        a, b, c = (rng.standard_normal(16).astype(np.float32) for _ in range(3))
        args = [client.buffer_from_host(x, device) for x in (a, b, c)]
        for exe, kwargs in ((pinned, {}), (portable, {"device": device})):
            (out,) = exe.execute(args, **kwargs)
            assert out.placement() is device
            np.testing.assert_allclose(out.to_host(), a.astype(np.float64) * b + c, rtol=1e-6, atol=1e-6)


def test_execute_on_several_devices(client: Client) -> None:
    devices = client.devices
    n = 128
    exe = client.compile(all_reduce(n, len(devices)), CompileOptions.for_devices([d.id for d in devices]))
    assert exe.devices == list(devices) and exe.num_replicas == len(devices)
    rng = np.random.default_rng()
    inputs = [rng.standard_normal(n).astype(np.float32) for _ in devices]
    outputs = exe.execute_sharded([[client.buffer_from_host(x, d)] for x, d in zip(inputs, exe.devices)])
    expected = np.sum(inputs, axis=0)
    assert len(outputs) == len(devices)
    for (out,), device in zip(outputs, exe.devices):
        assert out.placement() is device
        np.testing.assert_allclose(out.to_host(), expected, rtol=1e-5, atol=1e-5)


def test_replicated_program_gets_per_device_arguments(client: Client) -> None:
    devices = client.devices
    code = mul_add((10,), np.float32)
    exe = client.compile(code, CompileOptions.for_devices([d.id for d in reversed(devices)]))
    rng = np.random.default_rng()
    args = [[rng.standard_normal(10).astype(np.float32) for _ in range(3)] for _ in exe.devices]
    outputs = exe.execute_sharded([[client.buffer_from_host(x, d) for x in row] for row, d in zip(args, exe.devices)])
    for row, (out,) in zip(args, outputs):
        np.testing.assert_allclose(out.to_host(), row[0].astype(np.float64) * row[1] + row[2], rtol=1e-6, atol=1e-6)


def test_compile_options_bytes() -> None:
    assert CompileOptions().serialize() == bytes.fromhex("1a04200128 01".replace(" ", ""))
    two = CompileOptions.for_devices([3, 1]).serialize()
    # executable_build_options{num_replicas=2, num_partitions=1, device_assignment{2, 1, [3, 1]}}
    assert two == bytes.fromhex("1a10" "2002" "2801" "4a0a" "0802" "1001" "1a04" "0a02" "0301")
    assert CompileOptions(portable=True).serialize().endswith(bytes.fromhex("2001"))
    assert hash(CompileOptions.for_devices([0])) == hash(CompileOptions.for_devices([0]))


TRANSPOSE = """
func.func public @main(%a: tensor<3x5x2xf32>) -> tensor<2x3x5xf32> {
  %0 = stablehlo.transpose %a, dims = [2, 0, 1] : (tensor<3x5x2xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}
"""


@pytest.mark.parametrize("explicit_layout", [True, False], ids=["row-major-host-layout", "device-layout"])
@pytest.mark.parametrize("direct", [True, False], ids=["direct-copy", "plugin-copy"])
def test_layouts_come_back_row_major(client: Client, explicit_layout: bool, direct: bool,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "explicit_host_layout", explicit_layout)
    monkeypatch.setattr(client, "host_memcpy", client.host_memcpy and direct)
    a = np.random.default_rng().standard_normal((3, 5, 2)).astype(np.float32)
    (out,) = client.compile(TRANSPOSE).execute([client.buffer_from_host(a)])
    np.testing.assert_array_equal(out.to_host(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(client.buffer_from_host(a).to_host(), a)


def test_a_sharded_launch_destroys_the_dropped_buffers(client: Client) -> None:
    devices = client.devices
    exe = client.compile(mul_add((4,), np.float32), CompileOptions.for_devices([d.id for d in devices]))
    client.buffer_from_host(np.ones(4, np.float32))  # dropped at once: waits for the next launch
    assert client._dropped
    rows = [[client.buffer_from_host(np.full(4, i, np.float32), d)] * 3 for i, d in enumerate(exe.devices)]
    outputs = exe.execute_sharded(rows)
    assert not client._dropped
    for i, (out,) in enumerate(outputs):
        np.testing.assert_array_equal(out.to_host(), np.full(4, i * i + i, np.float32))
