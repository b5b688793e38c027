"""A function's LLVM IR written as text, line by line (no llvmlite IR objects).

llvmlite builds an object per instruction, type and constant and formats each on its own
when the module is printed: ~5 us an instruction on the development machine, most of the
Python time of a compile whose code is a loop nest of integer bookkeeping (conv_rows_text.py:
the convolution's rows, ~2.9 ms of the CNN's cold compile). Here an instruction is one
f-string. Values are strings (`%t3`, `@"g"`) or Python ints (i64 constants); the i64
helpers fold what is known (x + 0, x * 1, constants), which llvmlite's builder does not.
Loops have llvm_util.for_range's shape (bottom-tested, a guard unless start < stop is
known).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

Value = str | int


class FunctionText:
    """One function's body being written; `text()` is its definition."""

    def __init__(self, head: str) -> None:
        self._lines: list[str | None] = [head, "{", "entry:"]
        self.block = "entry"
        self._n = 0

    def fresh(self, stem: str = "t") -> str:
        """A new local name."""
        self._n += 1
        return f"%{stem}{self._n}"

    def op(self, text: str, stem: str = "t") -> str:
        """`%new = text`; returns %new."""
        r = self.fresh(stem)
        self._lines.append(f"  {r} = {text}")
        return r

    def do(self, text: str) -> None:
        """An instruction without a value (store, call void, br)."""
        self._lines.append(f"  {text}")

    def later(self) -> int:
        """A line left empty, to be written by `write_at` once its operands exist (a phi
        whose latch value comes after it)."""
        self._lines.append(None)
        return len(self._lines) - 1

    def write_at(self, at: int, text: str) -> None:
        self._lines[at] = f"  {text}"

    def label(self, name: str) -> None:
        self._lines.append(f"{name}:")
        self.block = name

    def text(self) -> str:
        return "\n".join(line for line in self._lines if line is not None) + "\n}\n"

    # i64 arithmetic, folded where an operand is known
    def add(self, a: Value, b: Value) -> Value:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if b == 0:
            return a
        if a == 0:
            return b
        return self.op(f"add i64 {a}, {b}")

    def mul(self, a: Value, b: Value) -> Value:
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if b == 1:
            return a
        if a == 1:
            return b
        if a == 0 or b == 0:
            return 0
        return self.op(f"mul i64 {a}, {b}")

    def binop(self, name: str, a: Value, b: Value) -> str:
        """`name i64 a, b` (sdiv, srem, urem, sub: written as they are)."""
        return self.op(f"{name} i64 {a}, {b}")

    def icmp(self, pred: str, a: Value, b: Value) -> str:
        return self.op(f"icmp {pred} i64 {a}, {b}")

    def gep(self, ty: str, ptr: str, index: Value) -> str:
        """&ptr[index] for a `ty*` pointer (ptr itself for index 0)."""
        if index == 0:
            return ptr
        return self.op(f"getelementptr {ty}, {ty}* {ptr}, i64 {index}")

    def load(self, ty: str, ptr: str) -> str:
        return self.op(f"load {ty}, {ty}* {ptr}")

    def store(self, ty: str, value: Value, ptr: str) -> None:
        self.do(f"store {ty} {value}, {ty}* {ptr}")

    def cast(self, ptr: str, src: str, dst: str) -> str:
        """bitcast of a pointer (nothing when the types agree)."""
        return ptr if src == dst else self.op(f"bitcast {src} {ptr} to {dst}")

    @contextlib.contextmanager
    def loop(self, start: Value, stop: Value, stem: str) -> Iterator[Value]:
        """`for (i = start; i < stop; i++)`; yields i. A loop of one known iteration is
        its body with i = start: no blocks, phi or compare for LLVM's -O0 generator to
        select (the CNN's rows: three such loops, a tenth of the cold module's text)."""
        if isinstance(start, int) and isinstance(stop, int) and stop == start + 1:
            yield start
            return
        self._n += 1
        k = self._n
        body, done = f"{stem}{k}.body", f"{stem}{k}.end"
        if isinstance(start, int) and isinstance(stop, int) and start < stop:
            self.do(f"br label %{body}")
        else:
            go = self.icmp("slt", start, stop)
            self.do(f"br i1 {go}, label %{body}, label %{done}")
        pre = self.block
        self.label(body)
        i = f"%{stem}{k}"
        at = len(self._lines)
        self._lines.append(None)  # the phi, once the latch block is known
        yield i
        nxt = self.op(f"add nsw i64 {i}, 1", f"{stem}{k}.next")
        self._lines[at] = f"  {i} = phi i64 [{start}, %{pre}], [{nxt}, %{self.block}]"
        more = self.icmp("slt", nxt, stop)
        self.do(f"br i1 {more}, label %{body}, label %{done}")
        self.label(done)

    @contextlib.contextmanager
    def if_then(self, cond: str) -> Iterator[None]:
        self._n += 1
        then, end = f"if{self._n}.then", f"if{self._n}.end"
        self.do(f"br i1 {cond}, label %{then}, label %{end}")
        self.label(then)
        yield
        self.do(f"br label %{end}")
        self.label(end)

    def if_else(self, cond: str) -> tuple[str, str, str]:
        """(then, else, end) labels after `br cond, then, else`; the caller writes
        label(then) ... br end, label(else) ... br end, label(end)."""
        self._n += 1
        then, other, end = (f"if{self._n}.then", f"if{self._n}.else", f"if{self._n}.end")
        self.do(f"br i1 {cond}, label %{then}, label %{other}")
        return then, other, end


__all__ = ["FunctionText", "Value"]
