"""Text mutations for the front-door fuzzers: tokens deleted, duplicated or swapped, numbers
replaced with extreme values, truncation, inserted punctuation and keywords."""

from __future__ import annotations

import random
import re

_TOKEN = re.compile(r"%[\w.#$-]+|@[\w.$-]+|[A-Za-z_][\w.$]*|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
                    r"|\"(?:[^\"\\\n]|\\.)*\"|\S")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")

EXTREMES = ["0", "-1", "1", "2", "-2", str(2**31), str(2**63), str(2**63 - 1), str(-(2**63)),
            str(2**64), "99999999999999999999", "1000000000000", "100000", "800000000",
            "1e308", "-1e308", "1e-320", "1e999", "0x7F800000", "0xFFFFFFFFFFFFFFFFFFFF", "0x",
            "1.5", "nan", "inf", "-0", "0.0", "7" * 5000]
PUNCT = ["(", ")", "<", ">", "{", "}", "[", "]", ",", ":", "=", "%", "#", "!", '"', "x", "?",
         "->", "@", "^", "*", "-", "+", "|", "/*", "*/", "//", "\n", " ", "\\", "'", "0x",
         "tensor<", "tuple<", "complex<", "dense<", "array<i64:", "#stablehlo.dot<", "loc(",
         "{", "(", "[[[[", "tuple<tuple<tuple<", "((((", "f32[", "s32[]", "ROOT ", "ENTRY ",
         "%x = ", "region", "^bb0", "-> (", "!quant.uniform<i8:f32, 0.5>", "index", "e5m2"]


def tokens(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _TOKEN.finditer(text)]


def mutate_once(text: str, rng: random.Random) -> str:
    spans = tokens(text)
    if not spans:
        return text + rng.choice(PUNCT)
    kind = rng.randrange(9)
    a, b = spans[rng.randrange(len(spans))]
    if kind == 0:  # delete a token
        return text[:a] + text[b:]
    if kind == 1:  # duplicate a token
        return text[:b] + " " + text[a:b] + text[b:]
    if kind == 2:  # swap two tokens
        c, d = spans[rng.randrange(len(spans))]
        if c < a:
            a, b, c, d = c, d, a, b
        if b > c:
            return text
        return text[:a] + text[c:d] + text[b:c] + text[a:b] + text[d:]
    if kind == 3:  # replace a number (dims included) with an extreme value
        nums = [m.span() for m in _NUMBER.finditer(text)]
        if nums:
            a, b = nums[rng.randrange(len(nums))]
        return text[:a] + rng.choice(EXTREMES) + text[b:]
    if kind == 4:  # truncate
        return text[:rng.randrange(len(text) + 1)]
    if kind == 5:  # insert punctuation or a keyword
        pos = rng.randrange(len(text) + 1)
        return text[:pos] + rng.choice(PUNCT) + text[pos:]
    if kind == 6:  # delete a character run
        pos = rng.randrange(len(text))
        return text[:pos] + text[pos + rng.randrange(1, 8):]
    if kind == 7:  # replace a token with another token of the text
        c, d = spans[rng.randrange(len(spans))]
        return text[:a] + text[c:d] + text[b:]
    # duplicate a whole line (ops, fields, attributes twice)
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    lines.insert(i, lines[i])
    return "\n".join(lines)


def mutate(text: str, rng: random.Random) -> str:
    """One to three mutations of `text`."""
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        text = mutate_once(text, rng)
    return text
