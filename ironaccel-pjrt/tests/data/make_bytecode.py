"""Regenerate squared_difference.mlirbc: a StableHLO portable artifact (MLIR bytecode).

Needs jaxlib (for its StableHLO bindings) only here, never at test time:
    python tests/data/make_bytecode.py
Target version 1.0.0 so that every plugin from API 0.81 on (StableHLO >= 0.9) reads it.
"""

from pathlib import Path

from jaxlib.mlir.dialects import stablehlo

TEXT = """func.func public @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.subtract %a, %b : tensor<8xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<8xf32>
  return %1 : tensor<8xf32>
}
"""

if __name__ == "__main__":
    out = Path(__file__).with_name("squared_difference.mlirbc")
    out.write_bytes(stablehlo.serialize_portable_artifact_str(TEXT, "1.0.0"))
    print(f"wrote {out}")
