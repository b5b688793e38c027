"""Builder ops: indexing family (being written)."""

__all__: list[str] = []
