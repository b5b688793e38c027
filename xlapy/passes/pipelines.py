"""Named pipelines and passes.

`cpu` is the cpu backend's own pipeline (backends/cpu/pipeline.py): what `CpuBackend.compile`
runs, ending in the cpu fusion. `xla-cpu` is XLA:CPU's pass order (cpu_compiler.cc,
simplified), the test bed of the generic passes - not what any backend runs:

chlo lowering -> expanders -> call inlining -> fixed-point simplification (algebraic
simplifier, tuple and while-loop simplifiers, while-loop invariant code motion, constant
folding, reshape canonicalization, DCE) -> dot canonicalization (transpose folding, then
decomposition into [batch, M, K] x [batch, K, N]) -> CSE -> layout assignment -> fusion ->
multi-output fusion -> simplification after layout -> DCE -> scheduling -> buffer assignment.
"""

from __future__ import annotations

from collections.abc import Callable

from xlapy.errors import XlapyError
from xlapy.ir import Instruction
from xlapy.passes.algebraic_simplifier import AlgebraicSimplifier
from xlapy.passes.buffer_assignment import BufferAssignmentPass
from xlapy.passes.canonicalize import ReshapeCanonicalizer
from xlapy.passes.chlo_lowering import ChloLowering
from xlapy.passes.conditional_simplifier import ConditionalSimplifier
from xlapy.passes.conditional_to_select import ConditionalToSelect
from xlapy.passes.constant_folding import ConstantFolding
from xlapy.passes.cse import CommonSubexpressionElimination
from xlapy.passes.dce import DeadCodeElimination
from xlapy.passes.dot_canonicalizer import DotCanonicalizer
from xlapy.passes.dot_decomposer import DotDecomposer
from xlapy.passes.expanders import BatchNormExpander, LogisticExpander
from xlapy.passes.expanders_ops import (
    BatchNormTrainingGradExpander,
    RngExpander,
    SelectAndScatterExpander,
)
from xlapy.passes.fusion import InstructionFusion, MultiOutputFusion
from xlapy.passes.inliner import CallInliner
from xlapy.passes.layout_assignment import LayoutAssignment
from xlapy.passes.native_forms import native_form_passes
from xlapy.passes.optimization_barrier_expander import OptimizationBarrierExpander
from xlapy.passes.pass_base import FixedPointGroup, Pass, Pipeline
from xlapy.passes.rng_bit_generator_expander import RngBitGeneratorExpander
from xlapy.passes.scan_lowering import ScanLowering
from xlapy.passes.scatter_window import LoopScatterWindows
from xlapy.passes.scheduling import MemorySchedule
from xlapy.passes.splat_constants import SplatToBroadcast
from xlapy.passes.static_shapes import StaticShapes
from xlapy.passes.tuple_simplifier import TupleSimplifier
from xlapy.passes.while_loop_licm import WhileLoopInvariantCodeMotion
from xlapy.passes.while_loop_simplifier import WhileLoopSimplifier
from xlapy.passes.while_loop_unroller import NestedLoopUnroller


def simplification_group(exact_only: bool = False) -> FixedPointGroup:
    return FixedPointGroup("simplification", [
        AlgebraicSimplifier(exact_only=exact_only), TupleSimplifier(), WhileLoopSimplifier(),
        WhileLoopInvariantCodeMotion(), ConstantFolding(), ConditionalSimplifier(),
        ReshapeCanonicalizer(), DeadCodeElimination(),
    ])


def xla_cpu_pipeline(verify: bool = False, exact_only: bool = False, expand: bool = True,
                     print_after_all: Callable[[str], None] | None = None,
                     expand_rng: bool = False) -> Pipeline:
    """XLA:CPU's pass order (not what the cpu backend runs: that is `backend_pipeline`).
    `exact_only` keeps every rewrite bit-exact; `expand=False`
    skips the (reassociating) expanders; `expand_rng` turns rng into rng_bit_generator
    arithmetic (other random values than the interpreter's rng, so off by default)."""
    passes: list[Pass] = [ChloLowering(exact_only=exact_only or not expand),
                          *native_form_passes(exact_only or not expand)]
    if expand:
        passes += [LogisticExpander(), BatchNormExpander(), BatchNormTrainingGradExpander(),
                   SelectAndScatterExpander()]
        if expand_rng:
            passes.append(RngExpander())
    passes += [
        CallInliner(),
        simplification_group(exact_only),
        DotCanonicalizer(),
        DotDecomposer(),
        CommonSubexpressionElimination(),
        DeadCodeElimination(),
        LayoutAssignment(),
        InstructionFusion(),
        MultiOutputFusion(),
        FixedPointGroup("simplification-after-layout", [
            AlgebraicSimplifier(exact_only=True), TupleSimplifier(), DeadCodeElimination()]),
        MemorySchedule(),
        BufferAssignmentPass(),
    ]
    return Pipeline("xla-cpu", passes, verify, print_after_all)


#: The name the passes' tests know XLA:CPU's order by.
cpu_pipeline = xla_cpu_pipeline


def backend_pipeline(verify: bool = False,
                     print_after_all: Callable[[str], None] | None = None,
                     native_chlo: Callable[[Instruction], bool] | None = None) -> Pipeline:
    """The rewrites a native backend runs before its own fusion: chlo ops lowered to HLO
    (XLA's decompositions, so they compile to kernels instead of running on the
    interpreter), native forms, calls inlined (JAX's private functions would each be a thunk
    boundary), optimization barriers removed (XLA:CPU's expander: CSE then merges a
    checkpointed forward pass with its recomputation), small loops inside loops unrolled and
    small pure conditionals as selects (either kept the loop around it off the native
    driver), rng_bit_generator expanded to integer HLO (it would run on the interpreter),
    then the bit-exact simplifications, CSE and DCE. The cpu backend's pipeline is these
    followed by its fusion pass (backends/cpu/pipeline.py); the gpu backend runs them as is.
    `native_chlo`: the chlo ops the backend's kernels compute themselves (kept)."""
    return Pipeline("backend", [ChloLowering(native=native_chlo), *native_form_passes(),
                                CallInliner(), OptimizationBarrierExpander(),
                                NestedLoopUnroller(), ConditionalToSelect(),
                                LoopScatterWindows(), RngBitGeneratorExpander.for_cpu(),
                                simplification_group(exact_only=True),
                                SplatToBroadcast(), CommonSubexpressionElimination(),
                                DeadCodeElimination()], verify, print_after_all)


#: Single passes by the names `xlapy opt --passes a,b` accepts.
PASSES: dict[str, Callable[[], Pass]] = {
    "dce": DeadCodeElimination,
    "optimization-barrier-expander": OptimizationBarrierExpander,
    "cond-to-select": ConditionalToSelect,
    "cond-simplifier": ConditionalSimplifier,
    "unroll-nested-loops": NestedLoopUnroller,
    "loop-scatter-windows": LoopScatterWindows,
    "chlo-lowering": ChloLowering,
    "cse": CommonSubexpressionElimination,
    "constant-folding": ConstantFolding,
    "algsimp": AlgebraicSimplifier,
    "algsimp-exact": lambda: AlgebraicSimplifier(exact_only=True),
    "call-inliner": CallInliner,
    "splat-to-broadcast": SplatToBroadcast,
    "static-shapes": StaticShapes,
    "scan-lowering": ScanLowering,
    "tuple-simplifier": TupleSimplifier,
    "while-loop-simplifier": WhileLoopSimplifier,
    "logistic-expander": LogisticExpander,
    "batchnorm-expander": BatchNormExpander,
    "batchnorm-training-grad-expander": BatchNormTrainingGradExpander,
    "select-and-scatter-expander": SelectAndScatterExpander,
    "rng-expander": RngExpander,
    "rng-bit-generator-expander": RngBitGeneratorExpander,
    "reshape-canonicalizer": ReshapeCanonicalizer,
    "dot-canonicalizer": DotCanonicalizer,
    "dot-decomposer": DotDecomposer,
    "while-licm": WhileLoopInvariantCodeMotion,
    "layout-assignment": LayoutAssignment,
    "fusion": InstructionFusion,
    "multi-output-fusion": MultiOutputFusion,
    "schedule": MemorySchedule,
    "buffer-assignment": BufferAssignmentPass,
    "simplification": simplification_group,
}

def spmd_pipeline(verify: bool = False,
                  print_after_all: Callable[[str], None] | None = None) -> Pipeline:
    """A sharded module (GSPMD / Shardy shardings) -> its per-partition program
    (passes/spmd)."""
    from xlapy.passes.spmd import SpmdPartitioner

    return Pipeline("spmd", [SpmdPartitioner()], verify, print_after_all)


#: Pipelines by name (`xlapy opt --pipeline NAME`). `cpu`, the cpu backend's own pipeline
#: (backends/cpu/pipeline.py), is registered by xlapy.backends: passes sit below backends.
PIPELINES: dict[str, Callable[..., Pipeline]] = {"xla-cpu": xla_cpu_pipeline,
                                                 "backend": backend_pipeline,
                                                 "spmd": spmd_pipeline}


def make_pass(name: str) -> Pass:
    try:
        return PASSES[name]()
    except KeyError:
        raise XlapyError(f"unknown pass '{name}'; known: {', '.join(sorted(PASSES))}") from None


def register_pipeline(name: str, factory: Callable[..., Pipeline]) -> None:
    PIPELINES[name] = factory


def make_pipeline(name: str, **kwargs: object) -> Pipeline:
    try:
        return PIPELINES[name](**kwargs)
    except KeyError:
        raise XlapyError(f"unknown pipeline '{name}'; known: {', '.join(PIPELINES)}") from None
