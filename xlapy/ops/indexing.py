"""Op family: indexing (being written)."""
