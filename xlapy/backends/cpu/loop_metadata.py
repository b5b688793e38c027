"""Loop metadata for the loops llvm_util.for_range emits.

llvmlite cannot print a distinct or self-referential node, which loop IDs and access groups
must be, so a loop gets a placeholder node that module_text rewrites: an interleave count
(`xlapy.loop.ic.N`), no vectorization (`xlapy.loop.novec`: dus_window's gathers and
scatters), or a parallel loop (`xlapy.loop.parallel.N`, naming the module's access group
`xlapy.access.group`). A parallel loop's loads and stores are in the group its
llvm.loop.parallel_accesses names: no iteration reads what another writes, so the vectorizer
needs no run-time check that the result does not overlap an operand. An element-wise
kernel's result written over the operand it reads at the same element (inplace.py, a
native loop's state carried in place) always failed that check: its loop ran scalar (a
Mandelbrot loop over complex values, one thread 15.7 ms -> 2.9).
"""

from __future__ import annotations

import re

from llvmlite import ir

_IC = re.compile(r'^(![0-9]+) = !\{ *!"xlapy\.loop\.ic\.([0-9]+)" *\}', re.M)
_NOVEC = re.compile(r'^(![0-9]+) = !\{ *!"xlapy\.loop\.novec" *\}', re.M)
_PARALLEL = re.compile(
    r'^(![0-9]+) = !\{ *!"xlapy\.loop\.parallel\.([0-9]+)", *(![0-9]+) *\}', re.M)
_GROUP = re.compile(r'^(![0-9]+) = !\{ *!"xlapy\.access\.group" *\}', re.M)


def resolve(text: str) -> str:
    """Module text with its placeholder nodes as the loop IDs and access groups they stand
    for. Only the metadata lines at its end are searched: a `^` pattern in multi-line mode
    is tried at every character (four passes over attention_bf16's 68 KB of kernel text
    were 2.6 ms of a 45 ms compile; over the tail, 0.1)."""
    at = text.find("\n!")
    if at < 0:
        return text
    return text[:at] + _resolve(text[at:])


def _resolve(text: str) -> str:
    text = _IC.sub(r'\1 = distinct !{\1, !{!"llvm.loop.interleave.count", i32 \2}}', text)
    text = _NOVEC.sub(r'\1 = distinct !{\1, !{!"llvm.loop.vectorize.enable", i1 false}}', text)
    text = _PARALLEL.sub(_parallel, text)
    return _GROUP.sub(r'\1 = distinct !{}', text)


def _parallel(m: re.Match[str]) -> str:
    ic = f', !{{!"llvm.loop.interleave.count", i32 {m[2]}}}' if int(m[2]) > 1 else ""
    return f'{m[1]} = distinct !{{{m[1]}, !{{!"llvm.loop.parallel_accesses", {m[3]}}}{ic}}}'


def mark(br: ir.Instruction, parallel: ir.Block | None, interleave: int) -> None:
    """Loop metadata on back edge `br`: `parallel`, the loop's one block, whose loads and
    stores join the access group; `interleave` > 1, the vector bodies an iteration."""
    mod = br.module
    if parallel is not None:
        group = mod.add_metadata([ir.MetaDataString(mod, "xlapy.access.group")])
        for ins in parallel.instructions:
            if isinstance(ins, (ir.LoadInstr, ir.StoreInstr)):
                ins.set_metadata("llvm.access.group", group)
        br.set_metadata("llvm.loop", mod.add_metadata(
            [ir.MetaDataString(mod, f"xlapy.loop.parallel.{max(interleave, 1)}"), group]))
    elif interleave > 1:
        br.set_metadata("llvm.loop", mod.add_metadata(
            [ir.MetaDataString(mod, f"xlapy.loop.ic.{interleave}")]))


def no_vectorize(fn: ir.Function) -> None:
    """Mark every loop of `fn` (each back edge for_range emits) not to be vectorized
    (llvm.loop.vectorize.enable false): loops whose vectors would be gathers and scatters
    (dus_window.py)."""
    at = {id(blk): k for k, blk in enumerate(fn.blocks)}
    for k, blk in enumerate(fn.blocks):
        br = blk.terminator
        if isinstance(br, ir.ConditionalBranch) and not br.metadata.get("llvm.loop") and \
                at[id(br.operands[1])] <= k:
            novec(br)


def novec(br: ir.Instruction) -> None:
    """Loop back edge `br` not to be vectorized."""
    br.set_metadata("llvm.loop", br.module.add_metadata(
        [ir.MetaDataString(br.module, "xlapy.loop.novec")]))


__all__ = ["mark", "no_vectorize", "resolve"]
