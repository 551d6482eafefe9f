"""Reading @main's parameters from StableHLO text (no plugin needed)."""

from __future__ import annotations

from ironaccel.types import DType
from ironaccel_pjrt.signature import Parameter, main_signature

JAX_STYLE = b'''
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3x4xf32> {mhlo.layout_mode = "default", jax.arg_info = "x[0]"},
                         %arg1: tensor<bf16>, %arg2: tensor<?x2xcomplex<f64>>, %arg3: tensor<8xi1>,
                         %arg4: !stablehlo.token, %arg5: tensor<2xui32>, %arg6: tensor<4xf8E4M3FN>)
      -> (tensor<3x4xf32> {jax.result_info = ""}) {
    return %arg0 : tensor<3x4xf32>
  }
}
'''


def test_jax_style_module() -> None:
    params = main_signature(JAX_STYLE)
    assert params == [
        Parameter((3, 4), DType.FLOAT32),
        Parameter((), DType.BFLOAT16),
        Parameter((None, 2), DType.COMPLEX128),
        Parameter((8,), DType.BOOL),
        Parameter(None, None),
        Parameter((2,), DType.UINT32),
        Parameter((4,), None),
    ]
    assert params[2].accepts((7, 2), DType.COMPLEX128, True)
    assert not params[2].accepts((7, 3), DType.COMPLEX128, True)
    assert not params[0].accepts((4, 3), DType.FLOAT32, True)
    assert params[0].accepts((4, 3), DType.FLOAT32, False)  # sharded programs: shapes not checked
    assert not params[0].accepts((3, 4), DType.FLOAT64, False)
    assert params[6].accepts((4,), DType.UINT8, True)  # unknown element type: not checked


def test_unreadable_programs_give_no_signature() -> None:
    assert main_signature(b"ML\xefR\x00bytecode") is None
    assert main_signature(b"func.func @other(%a: tensor<f32>) -> tensor<f32>") is None
    assert main_signature(b"func.func @main(%a: tensor<4xf32>") is None  # unbalanced
    assert main_signature(b"\xff\xfe") is None
    assert main_signature(b"func.func @main() -> tensor<f32> {}") == []
