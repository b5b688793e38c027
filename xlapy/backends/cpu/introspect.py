"""What a cpu executable compiled and how each instruction runs: the inspection methods of
`CpuExecutable` (explain, fallbacks, kernels, objects), none of them on the per-call path."""

from __future__ import annotations

from typing import Any


class Introspection:
    """Mixed into CpuExecutable: reads its `report`, `subexecs`, `objects` and `comp`."""

    report: list[tuple[str, str, str]]
    subexecs: list[tuple[str, Any]]
    objects: list[tuple[str, bytes]]
    finish: Any
    bind: Any
    comp: Any
    fusion: Any

    def explain(self, summary: bool = True, seen: dict[int, str] | None = None) -> str:
        """One line per instruction: how it runs (kernel, library, control flow, fallback),
        then the same for the computations control flow calls (one that loops share,
        computation_dedup.py, once)."""
        self.finish()  # (a deferred case/if's line names what it ran as once built)
        seen = {} if seen is None else seen
        lines = [f"computation {self.comp.name}:"]
        lines += [f"  {name:24s} {op:24s} {how}" for name, op, how in self.report]
        for owner, sub in self.subexecs:
            if id(sub) in seen:
                lines.append(f"-- called by %{owner}: {sub.comp.name}, as for %{seen[id(sub)]}")
                continue
            seen[id(sub)] = owner
            lines.append(f"-- called by %{owner}")
            lines.append(sub.explain(summary=False, seen=seen))
        if not summary:
            return "\n".join(lines)
        fb = self.fallbacks()
        lines.append(f"-- {len(fb)} instruction(s) on interpreter fallback"
                     + (": " + ", ".join(sorted({op for _, op in fb})) if fb else ""))
        if getattr(self, "trip", None) is not None:
            lines.append(f"-- {self.comp.name} runs as one native loop trip (branch_loop.py)")
        return "\n".join(lines)

    def fallbacks(self, seen: set[int] | None = None) -> list[tuple[str, str]]:
        """(instruction, opcode) of every op that runs an interpreter kernel, nested too (a
        sub-executable loops share counted once)."""
        seen = set() if seen is None else seen
        out = [(r[0], r[1]) for r in self.report if r[2] == "interpreter fallback"]
        for _, sub in self.subexecs:
            if id(sub) not in seen:
                seen.add(id(sub))
                out += sub.fallbacks(seen)
        return out

    def fusions(self) -> list[str]:
        """The kernels each computation fused, by computation name: the cpu-fusion pass's
        plans (CpuFusionPlan.describe) as this executable and those it runs consumed them."""
        plans: dict[str, Any] = {}
        stack: list[Any] = [self]
        while stack:
            exe = stack.pop()
            plans.setdefault(exe.comp.name, exe.fusion)
            stack.extend(sub for _, sub in exe.subexecs)
        return [line for name in sorted(plans) for line in plans[name].describe()]

    def all_objects(self) -> list[tuple[str, bytes]]:
        """The object files of this computation and of those its control flow calls (a
        deferred compile finished first: branch_loop.defer_thunks; a fused loop's condition
        and body compiled: loop_fused.py)."""
        self.bind()
        out = list(self.objects)
        for _, sub in self.subexecs:
            out += sub.all_objects()
        return out

    def kernels(self, seen: set[int] | None = None) -> list[tuple[str, str]]:
        """(kernel name, root instruction) of every compiled kernel, nested too; a
        sub-executable loops share (branch_loop.sharing) counts once."""
        seen = set() if seen is None else seen
        out = [(f"{self.comp.name}.{r[2].split()[1]}", r[0]) for r in self.report
               if r[2].startswith("kernel ")]
        for _, sub in self.subexecs:
            if sub is not None and id(sub) not in seen:
                seen.add(id(sub))
                out += sub.kernels(seen)
        return out


__all__ = ["Introspection"]
