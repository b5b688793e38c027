"""xlapy: XLA, the compiler for linear algebra, in Python."""

from xlapy import distributed as _distributed  # noqa: F401  (registers the process grid)
from xlapy import ops as _ops  # noqa: F401  (fills the op registry)
from xlapy.api import compile  # noqa: A004  (xlapy.compile: text/path/module -> executable)
from xlapy.builder import XlaBuilder, XlaComputation, XlaOp
from xlapy.errors import (
    BuilderError,
    InterpreterError,
    ParseError,
    ShapeInferenceError,
    Unimplemented,
    VerificationError,
    XlapyError,
)
from xlapy.runtime import Client, ClientLibrary, GlobalData
from xlapy.types import ElementType, Layout, Literal, Shape

__version__ = "0.1.0"

__all__ = [
    "BuilderError", "Client", "ClientLibrary", "ElementType", "GlobalData", "InterpreterError",
    "Layout", "Literal", "ParseError", "Shape", "ShapeInferenceError", "Unimplemented",
    "VerificationError", "XlaBuilder", "XlaComputation", "XlaOp", "XlapyError",
    "compile",
]
