"""Builder ops: collectives family (being written)."""

__all__: list[str] = []
