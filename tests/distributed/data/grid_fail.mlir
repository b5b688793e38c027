// Chunk 1 fails on process 1 only (its check); chunk 2 passes; chunk 3 prints from each process.
module @one_process_fails {
  func.func @ok(%x: tensor<2xi64>) -> tensor<2xi64> {
    %r = "stablehlo.all_reduce"(%x) ({
      ^bb0(%a: tensor<i64>, %b: tensor<i64>):
        %s = stablehlo.add %a, %b : tensor<i64>
        stablehlo.return %s : tensor<i64>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xi64>) -> tensor<2xi64>
    return %r : tensor<2xi64>
  }
  func.func @bad(%x: tensor<2xi64>) -> tensor<2xi64> {
    %r = "stablehlo.all_reduce"(%x) ({
      ^bb0(%a: tensor<i64>, %b: tensor<i64>):
        %s = stablehlo.add %a, %b : tensor<i64>
        stablehlo.return %s : tensor<i64>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xi64>) -> tensor<2xi64>
    check.expect_eq_const %r, dense<[0, 0]> : tensor<2xi64>
    return %r : tensor<2xi64>
  }
  func.func @main() {
    %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
    %r:2 = "interpreter.run_parallel"(%0, %0) {
      programs = [[@ok], [@bad]]
    } : (tensor<2xi64>, tensor<2xi64>) -> (tensor<2xi64>, tensor<2xi64>)
    func.return
  }
}

// -----

module @passes {
  func.func @p(%x: tensor<2xi64>) -> tensor<2xi64> {
    %r = "stablehlo.all_reduce"(%x) ({
      ^bb0(%a: tensor<i64>, %b: tensor<i64>):
        %s = stablehlo.maximum %a, %b : tensor<i64>
        stablehlo.return %s : tensor<i64>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xi64>) -> tensor<2xi64>
    return %r : tensor<2xi64>
  }
  func.func @main() {
    %0 = stablehlo.constant dense<[1, 7]> : tensor<2xi64>
    %1 = stablehlo.constant dense<[5, 2]> : tensor<2xi64>
    %r:2 = "interpreter.run_parallel"(%0, %1) {
      programs = [[@p], [@p]]
    } : (tensor<2xi64>, tensor<2xi64>) -> (tensor<2xi64>, tensor<2xi64>)
    check.expect_eq_const %r#0, dense<[5, 7]> : tensor<2xi64>
    check.expect_eq_const %r#1, dense<[5, 7]> : tensor<2xi64>
    func.return
  }
}
