"""Builder ops: elementwise family (being written)."""

__all__: list[str] = []
