"""The HLO text front door: parse XLA's HloModule text into the IR and print modules back.

`parse_hlo_module(text)` reads what `jax.jit(f).lower(...).compiler_ir("hlo").as_hlo_text()`
and `.compile().as_text()` print (and XLA's test files); `print_hlo_module(module)` writes any
module so that `parse_hlo_module(print_hlo_module(m))` is structurally `m`.

Layouts (`f32[64,32]{0,1}`): values in the IR are logical arrays, so a program's arguments
and results are the logical arrays whatever `entry_computation_layout` and the parameters
say (numpy arrays of the logical shape: converted at the boundary). Inside, a `copy` that
changes the layout is the identity, and a `bitcast` -- a reinterpretation of the bytes --
becomes the transpose / reshape the two layouts imply (importer.py). XLA's fusions, schedule
and annotations: importer.py's PASSIVE_ATTRS; the cpu backend inlines fusions
(passes/inliner.py) and fuses again itself.
"""

from __future__ import annotations

import re

from xlapy.hlo_text.cursor import Cursor
from xlapy.hlo_text.importer import HloImporter
from xlapy.hlo_text.parser import HloParser
from xlapy.ir import Module
from xlapy.phases import phase

# Possessive and one character per repetition: `(?:\s+)*` backtracks exponentially on a long
# run of whitespace that is not followed by `HloModule` (any StableHLO text with indentation).
_HEAD = re.compile(r"(?:\s|/\*.*?\*/)*+HloModule\b", re.S)


def is_hlo_text(text: str) -> bool:
    """Whether `text` starts (after whitespace and comments) with `HloModule`."""
    return _HEAD.match(text) is not None


def parse_hlo_module(text: str, filename: str = "<input>") -> Module:
    """Parse and import one HloModule (ParseError with file:line:col and a caret on bad input)."""
    with phase("parse"):
        parser = HloParser(text, filename)
        node = parser.parse_module()
    with phase("import"):
        return HloImporter(node, parser.cur).run()


def print_hlo_module(module: Module) -> str:
    from xlapy.hlo_text.printer import print_hlo_module as _print

    return _print(module)


__all__ = ["Cursor", "is_hlo_text", "parse_hlo_module", "print_hlo_module"]
