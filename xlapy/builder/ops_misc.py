"""Builder ops: misc family (being written)."""

__all__: list[str] = []
