"""Mutation fuzzers of the front doors (`python -m tests.fuzz.run --help`) and their helpers."""
