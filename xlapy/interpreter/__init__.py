"""Layer 7: the exact reference interpreter (whole-array numpy)."""

from xlapy.interpreter.evaluator import Interpreter, RuntimeState, check_value

__all__ = ["Interpreter", "RuntimeState", "check_value"]
