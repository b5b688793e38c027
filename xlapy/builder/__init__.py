"""Layer 5 front door: the seeds' XlaBuilder / ComputationBuilder in jax xla_client style."""

from xlapy.builder import ops
from xlapy.builder.xla_builder import OpMetadata, ProgramShape, XlaBuilder, XlaComputation, XlaOp

__all__ = ["OpMetadata", "ProgramShape", "XlaBuilder", "XlaComputation", "XlaOp", "ops"]
