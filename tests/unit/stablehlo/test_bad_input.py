"""Bad input gives clear errors, never a Python traceback: dense literals and a small fuzz."""

from __future__ import annotations

import random

import pytest

from xlapy.cli.main import run_chunk
from xlapy.errors import ParseError
from xlapy.stablehlo import parse_module


@pytest.mark.parametrize(("body", "match"), [
    ("[1.0%, 2.0]", "unexpected '%'"),
    ("[1.0x0, 2.0]", "unexpected 'x'"),
    ("[0x8000x00, 1.0]", "bad dense literal|unexpected"),
    ("[0x1FFFFFFFF, 1.0]", "bad dense literal"),
])
def test_bad_dense_literals(body: str, match: str) -> None:
    text = f"""func.func @main() -> tensor<2xf32> {{
  %0 = stablehlo.constant dense<{body}> : tensor<2xf32>
  return %0 : tensor<2xf32>
}}"""
    with pytest.raises(ParseError, match=match):
        parse_module(text)


SAMPLE = """func.func @main(%a: tensor<2x3xf32>) -> tensor<3xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0]
    : (tensor<2x3xf32>, tensor<f32>) -> tensor<3xf32>
  %1 = stablehlo.compare  GT, %0, %0,  FLOAT : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %2 = stablehlo.select %1, %0, %0 : tensor<3xi1>, tensor<3xf32>
  %3 = "stablehlo.broadcast_in_dim"(%z) {broadcast_dimensions = array<i64>}
    : (tensor<f32>) -> tensor<3xf32>
  %4 = stablehlo.add %2, %3 : tensor<3xf32>
  return %4 : tensor<3xf32>
}"""


def test_mutations_give_clear_errors() -> None:
    """Truncations, deletions and inserted tokens: ok, or a ChunkResult with a message."""
    rng = random.Random(7)
    for _ in range(150):
        i = rng.randrange(len(SAMPLE))
        kind = rng.randrange(3)
        if kind == 0:
            text = SAMPLE[:i]
        elif kind == 1:
            text = SAMPLE[:i] + SAMPLE[i + rng.randrange(1, 6):]
        else:
            text = SAMPLE[:i] + rng.choice(["%", "(", "}", "<", "x", "0x", "#", '"', "?",
                                            ":", ",", "-1", "tensor<"]) + SAMPLE[i:]
        result = run_chunk(text, "fuzz.mlir")  # raises on anything but a clear error
        assert result.ok or result.message
