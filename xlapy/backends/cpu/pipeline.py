"""The cpu backend's pass pipeline: what `CpuBackend.compile` runs and what `xlapy opt
--pipeline cpu` prints, one and the same object.

chlo lowering -> native forms -> call inlining -> rng_bit_generator expansion -> bit-exact
simplification -> splat constants to broadcasts -> CSE -> DCE (`passes.backend_pipeline`) ->
transpose(dot(A, B)) as dot(B, A) (`dot_transpose.py`) -> dots into 2-D product layout
(`dot_flatten.py`) -> lhs-dilated convolutions as their phases (`conv_polyphase.py`) ->
small batched dots as reduces (`small_dots.py`) -> long column sums in two levels
(`column_sums.py`) -> whole-array float max/min by rows first (`total_minmax.py`) ->
bf16/f16 dots and convolutions widened to f32 between converts
(`widen_dots.py`) -> narrow rows summed in f32 shared (`widened_rows.py`) -> top_k sorts
back to chlo.top_k (`topk_select.py`) -> cpu fusion. The last pass
changes no instruction: it stores a `CpuFusionPlan` per computation the executable plans (the
entry and the bodies control flow runs) in `module.meta["cpu_fusion"]`, and the executable
builds its kernels from those plans instead of deciding again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from xlapy.backends.cpu import target
from xlapy.backends.cpu.fusion_plan import CpuFusionPlan, plan_fusion
from xlapy.backends.cpu.options import CpuOptions
from xlapy.ir import Computation, Module
from xlapy.passes.fusion import CONTROL_FLOW
from xlapy.passes.fusion_decision import FusionDecision
from xlapy.passes.pass_base import Pass, Pipeline
from xlapy.phases import phase

#: module.meta key of the plans (computation name -> CpuFusionPlan).
META_KEY = "cpu_fusion"


def executed_computations(roots: Iterable[Computation]) -> list[Computation]:
    """`roots` and every computation their control flow runs as a cpu executable (bodies,
    conditions, branches; not reducers or comparators, which kernels inline)."""
    out: list[Computation] = []
    seen: set[int] = set()
    stack = list(roots)[::-1]
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.append(c)
        stack.extend(reversed([s for i in c.instructions if i.opcode in CONTROL_FLOW
                               for s in i.called]))
    return out


def plan_all(roots: Iterable[Computation], options: CpuOptions) -> dict[str, CpuFusionPlan]:
    """A fusion plan for each computation `executed_computations(roots)` lists (under the
    options' target: whether an op is fusible may depend on it)."""
    with target.use(options.target):
        return {c.name: plan_fusion(c, options.fusion, options.routines)
                for c in executed_computations(roots)}


class CpuFusion(Pass):
    """The cpu backend's fusion, as a pass: plans every executed computation (fusion_plan.py)
    and records each decision with its reason in `decisions`."""

    name = "cpu-fusion"

    def __init__(self, options: CpuOptions | None = None) -> None:
        self.options = options or CpuOptions.make()
        self.plans: dict[str, CpuFusionPlan] = {}

    @property
    def decisions(self) -> list[FusionDecision]:
        return [d for p in self.plans.values() for d in p.decisions]

    def run(self, module: Module) -> bool:
        roots = [module.entry_computation()] if module.entry is not None else []
        with phase("fusion plan"):
            self.plans = plan_all(roots, self.options)
        module.meta[META_KEY] = self.plans
        return False  # no instruction changes

    def describe(self) -> list[str]:
        """The kernels of every plan, by computation name (`compile --explain` prints the
        same lines: CpuExecutable.fusions)."""
        return [line for name in sorted(self.plans) for line in self.plans[name].describe()]


def cpu_pipeline(options: CpuOptions | None = None, verify: bool = False,
                 print_after_all: Callable[[str], None] | None = None) -> Pipeline:
    """The pipeline `CpuBackend.compile` runs: `passes.pipelines.backend_pipeline`'s rewrites
    (chlo lowering, native forms, call inlining, rng_bit_generator expansion, bit-exact
    simplification, splats as broadcasts, CSE, DCE), sums of broadcast products as dots
    (product_sums.py), transposes of dots computed by the dot and a 2-D rhs transpose read by it
    (dot_transpose.py), small dot operands transposed into 2-D product layout (dot_flatten.py),
    transposed convolutions as their phases (conv_polyphase.py), the general convolution loop
    nest's operands and results transposed to channels-last (conv_layout.py), small batched dots
    as reduces (small_dots.py), reductions over a short last dimension as element-wise folds
    (short_reduce.py), reductions keeping several dimensions after their reduced ones with
    those merged (kept_columns.py), column reductions of a narrow last dimension through whole
    vectors
    (narrow_columns.py), long column sums in two levels (column_sums.py), float max/min over a
    whole array by rows first (total_minmax.py), and argmax / argmin so (total_argbest.py),
    bf16/f16 dots and convolutions widened to f32 (their converts then fuse into the kernels
    around them), bf16 rows summed in f32 shared,
    sorts of an iota read as top_k made chlo.top_k again (topk_select.py), while conditions that
    return a state element as it is made a compare (cond_root.py), strided slices of whole rows
    as columns and reshapes merging a stack's short last dimension moved after the element-wise
    ops reading them (stack_reshape.py), calls of identical computations made calls of one
    (computation_dedup.py), pooling windows over a narrow last dimension as a fold of strided
    slices (window_slices.py), then the cpu fusion."""
    from xlapy.backends.cpu.column_sums import SplitColumnSums
    from xlapy.backends.cpu.cond_root import CondRootKernel
    from xlapy.backends.cpu.conv_layout import ChannelsLastConvolutions
    from xlapy.backends.cpu.conv_polyphase import PolyphaseConvolution
    from xlapy.backends.cpu.dot_flatten import FlattenDots
    from xlapy.backends.cpu.dot_transpose import FoldDotTranspose, FoldRhsTranspose
    from xlapy.backends.cpu.elementwise import native_chlo
    from xlapy.backends.cpu.kept_columns import MergeKeptColumns
    from xlapy.backends.cpu.narrow_columns import FoldNarrowColumns
    from xlapy.backends.cpu.product_sums import ProductSumsAsDots
    from xlapy.backends.cpu.short_reduce import ShortReductions
    from xlapy.backends.cpu.small_dots import SmallDotsAsReduces
    from xlapy.backends.cpu.stack_reshape import SinkStackReshapes, StridedSlicesAsColumns
    from xlapy.backends.cpu.topk_select import SelectTopK
    from xlapy.backends.cpu.total_argbest import TotalArgBest
    from xlapy.backends.cpu.total_minmax import TotalMinMax
    from xlapy.backends.cpu.widen_dots import WidenNarrowDots
    from xlapy.backends.cpu.widened_rows import ShareWidenedRows
    from xlapy.backends.cpu.window_slices import WindowSlices
    from xlapy.passes.computation_dedup import ComputationDeduplicator
    from xlapy.passes.pipelines import backend_pipeline

    target_ = (options or CpuOptions.make()).target
    return Pipeline("cpu", [*backend_pipeline(native_chlo=native_chlo).passes,
                            ProductSumsAsDots(), FoldDotTranspose(), FoldRhsTranspose(),
                            FlattenDots(), PolyphaseConvolution(),
                            ChannelsLastConvolutions(), SmallDotsAsReduces(),
                            ShortReductions(), WindowSlices(), MergeKeptColumns(),
                            FoldNarrowColumns(),
                            SplitColumnSums(),
                            TotalMinMax(), TotalArgBest(), WidenNarrowDots(target_),
                            ShareWidenedRows(), SelectTopK(), CondRootKernel(),
                            StridedSlicesAsColumns(), SinkStackReshapes(),
                            ComputationDeduplicator(), CpuFusion(options)],
                    verify, print_after_all)
