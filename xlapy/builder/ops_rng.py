"""Builder ops: rng family (being written)."""

__all__: list[str] = []
