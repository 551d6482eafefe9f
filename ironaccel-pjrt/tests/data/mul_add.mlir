func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<4xf32>
  %1 = stablehlo.add %0, %c : tensor<4xf32>
  return %1 : tensor<4xf32>
}
