"""Layer 6: HLO passes (simplification, fusion, layout, scheduling, buffer assignment).

Importing this package registers the `fusion` op, so fused modules verify and interpret.
"""

from xlapy.passes import fusion_op as _fusion_op  # noqa: F401  (registers the fusion op)
from xlapy.passes.pass_base import FixedPointGroup, Pass, PassContext, Pipeline, run_passes
from xlapy.passes.pipelines import PASSES, PIPELINES, cpu_pipeline, make_pass, make_pipeline

__all__ = ["FixedPointGroup", "PASSES", "PIPELINES", "Pass", "PassContext", "Pipeline",
           "cpu_pipeline", "make_pass", "make_pipeline", "run_passes"]
