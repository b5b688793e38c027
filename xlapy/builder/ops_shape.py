"""Builder ops: shape family (being written)."""

__all__: list[str] = []
