"""The JAX differential suite (issue 4): JAX functions lowered to StableHLO text, run through
`xlapy.compile` and compared with JAX's own outputs, plus the parse(print(m)) == m round trip."""
