"""Builder ops: reduction family (being written)."""

__all__: list[str] = []
