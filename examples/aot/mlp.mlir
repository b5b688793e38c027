// A 3-layer perceptron on a batch of 64 flattened 28x28 images: 784 -> 256 -> 256 -> 10,
// ReLU between layers, log-softmax at the end. Weights are arguments.
func.func @main(%x: tensor<64x784xf32>, %w1: tensor<784x256xf32>, %b1: tensor<256xf32>,
                %w2: tensor<256x256xf32>, %b2: tensor<256xf32>, %w3: tensor<256x10xf32>,
                %b3: tensor<10xf32>) -> tensor<64x10xf32> {
  %zero = stablehlo.constant dense<0.0> : tensor<64x256xf32>
  %h1 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<64x784xf32>, tensor<784x256xf32>) -> tensor<64x256xf32>
  %c1 = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<256xf32>) -> tensor<64x256xf32>
  %a1 = stablehlo.add %h1, %c1 : tensor<64x256xf32>
  %r1 = stablehlo.maximum %a1, %zero : tensor<64x256xf32>
  %h2 = stablehlo.dot_general %r1, %w2, contracting_dims = [1] x [0] : (tensor<64x256xf32>, tensor<256x256xf32>) -> tensor<64x256xf32>
  %c2 = stablehlo.broadcast_in_dim %b2, dims = [1] : (tensor<256xf32>) -> tensor<64x256xf32>
  %a2 = stablehlo.add %h2, %c2 : tensor<64x256xf32>
  %r2 = stablehlo.maximum %a2, %zero : tensor<64x256xf32>
  %h3 = stablehlo.dot_general %r2, %w3, contracting_dims = [1] x [0] : (tensor<64x256xf32>, tensor<256x10xf32>) -> tensor<64x10xf32>
  %c3 = stablehlo.broadcast_in_dim %b3, dims = [1] : (tensor<10xf32>) -> tensor<64x10xf32>
  %logits = stablehlo.add %h3, %c3 : tensor<64x10xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %mx = stablehlo.reduce(%logits init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<64x10xf32>, tensor<f32>) -> tensor<64xf32>
  %mxb = stablehlo.broadcast_in_dim %mx, dims = [0] : (tensor<64xf32>) -> tensor<64x10xf32>
  %sh = stablehlo.subtract %logits, %mxb : tensor<64x10xf32>
  %ex = stablehlo.exponential %sh : tensor<64x10xf32>
  %fz = stablehlo.constant dense<0.0> : tensor<f32>
  %se = stablehlo.reduce(%ex init: %fz) applies stablehlo.add across dimensions = [1] : (tensor<64x10xf32>, tensor<f32>) -> tensor<64xf32>
  %lse = stablehlo.log %se : tensor<64xf32>
  %lb = stablehlo.broadcast_in_dim %lse, dims = [0] : (tensor<64xf32>) -> tensor<64x10xf32>
  %out = stablehlo.subtract %sh, %lb : tensor<64x10xf32>
  return %out : tensor<64x10xf32>
}
