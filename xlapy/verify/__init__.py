"""Layer 4: the verifier."""

from xlapy.verify.verifier import verify_computation, verify_module

__all__ = ["verify_computation", "verify_module"]
