"""Op family: elementwise (being written)."""
