"""Builder ops: linalg family (being written)."""

__all__: list[str] = []
