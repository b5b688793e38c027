"""Seed 001's axpy (alpha * x + y), both versions: with parameters and with constants.

Run: python examples/axpy.py
"""

from __future__ import annotations

import numpy as np

import xlapy
from xlapy.builder import XlaBuilder, ops
from xlapy.types import Literal


def compute_axpy_parameters(alpha: Literal, x: Literal, y: Literal,
                            backend: str = "interpreter") -> Literal:
    """Build axpy over parameters, transfer the inputs to the service, execute, transfer back."""
    client = xlapy.ClientLibrary.local_client(backend)
    builder = XlaBuilder("axpy")
    param_alpha = ops.Parameter(builder, 0, alpha.shape, "alpha")
    param_x = ops.Parameter(builder, 1, x.shape, "x")
    param_y = ops.Parameter(builder, 2, y.shape, "y")
    ops.Add(ops.Mul(param_alpha, param_x), param_y)
    computation = builder.build()
    alpha_data = client.transfer_to_server(alpha)
    x_data = client.transfer_to_server(x)
    y_data = client.transfer_to_server(y)
    return client.execute_and_transfer(computation, [alpha_data, x_data, y_data])


def compute_axpy_constants(alpha: float, x: list[float], y: list[float],
                           backend: str = "interpreter") -> Literal:
    """The same graph with the inputs embedded as constants: no arguments at run time."""
    client = xlapy.ClientLibrary.local_client(backend)
    builder = XlaBuilder("axpy")
    constant_alpha = ops.ConstantR0(builder, alpha)
    constant_x = ops.ConstantR1(builder, x)
    constant_y = ops.ConstantR1(builder, y)
    ops.Add(ops.Mul(constant_alpha, constant_x), constant_y)
    computation = builder.build()
    return client.execute_and_transfer(computation, [])


def main() -> None:
    alpha = Literal.from_numpy(np.float32(3.14))
    x = Literal.from_numpy(np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    y = Literal.from_numpy(np.array([10.5, 20.5, 30.5, 40.5], np.float32))
    print("axpy with parameters:", compute_axpy_parameters(alpha, x, y))
    print("axpy with constants: ", compute_axpy_constants(3.14, [1.0, 2.0, 3.0, 4.0],
                                                          [10.5, 20.5, 30.5, 40.5]))


if __name__ == "__main__":
    main()
