// A small convolutional network on a batch of 8 32x32 RGB images (NHWC): two 3x3
// convolutions (3 -> 16 -> 32 channels, the second with stride 2) with ReLU, a 2x2 max
// pool, a global average pool and a 32 -> 10 dense layer. Weights are arguments (HWIO).
func.func @main(%x: tensor<8x32x32x3xf32>, %k1: tensor<3x3x3x16xf32>, %k2: tensor<3x3x16x32xf32>,
                %w: tensor<32x10xf32>, %b: tensor<10xf32>) -> tensor<8x10xf32> {
  %y1 = stablehlo.convolution(%x, %k1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<8x32x32x3xf32>, tensor<3x3x3x16xf32>) -> tensor<8x32x32x16xf32>
  %z1 = stablehlo.constant dense<0.0> : tensor<8x32x32x16xf32>
  %r1 = stablehlo.maximum %y1, %z1 : tensor<8x32x32x16xf32>
  %y2 = stablehlo.convolution(%r1, %k2) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [2, 2], pad = [[1, 1], [1, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<8x32x32x16xf32>, tensor<3x3x16x32xf32>) -> tensor<8x16x16x32xf32>
  %z2 = stablehlo.constant dense<0.0> : tensor<8x16x16x32xf32>
  %r2 = stablehlo.maximum %y2, %z2 : tensor<8x16x16x32xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %p = "stablehlo.reduce_window"(%r2, %ninf) ({
    ^bb0(%a: tensor<f32>, %c: tensor<f32>):
      %m = stablehlo.maximum %a, %c : tensor<f32>
      stablehlo.return %m : tensor<f32>
    }) {window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>} : (tensor<8x16x16x32xf32>, tensor<f32>) -> tensor<8x8x8x32xf32>
  %fz = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%p init: %fz) applies stablehlo.add across dimensions = [1, 2] : (tensor<8x8x8x32xf32>, tensor<f32>) -> tensor<8x32xf32>
  %n = stablehlo.constant dense<64.0> : tensor<8x32xf32>
  %avg = stablehlo.divide %s, %n : tensor<8x32xf32>
  %d = stablehlo.dot_general %avg, %w, contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x10xf32>) -> tensor<8x10xf32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<10xf32>) -> tensor<8x10xf32>
  %out = stablehlo.add %d, %bb : tensor<8x10xf32>
  return %out : tensor<8x10xf32>
}
