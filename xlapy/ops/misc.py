"""Op family: misc (being written)."""
