"""Symbol references the importer does not follow: `custom_call`'s `called_computations`.

The importer reads a custom_call's called computations only for the targets it lowers itself
(ApproxTopK, dynamic_reduce_window); for any other target they are kept by name. StableHLO's
symbol verifier still requires each to name a function of the module, so a dangling one is a
ParseError at the op, here, before import.
"""

from __future__ import annotations

from collections.abc import Iterable

from xlapy.errors import ParseError
from xlapy.stablehlo.lexer import Lexer
from xlapy.stablehlo.nodes import ModuleNode, OpNode, SymbolRef


def _ops(ops: Iterable[OpNode]) -> Iterable[OpNode]:
    for op in ops:
        yield op
        for region in op.regions:
            yield from _ops(region.ops)


def check_called_computations(node: ModuleNode, lex: Lexer) -> None:
    """Raise ParseError for a `called_computations` entry that names no function."""
    defined = {f.name for f in node.funcs}
    for f in node.funcs:
        for op in _ops(f.body):
            called = op.attrs.get("called_computations")
            if not isinstance(called, list):
                continue
            for ref in called:
                if isinstance(ref, SymbolRef) and ref.name not in defined:
                    raise ParseError(lex.span(op.pos), f"{op.name}: called_computations names "
                                                       f"@{ref.name}, which is not a function "
                                                       "of the module")
