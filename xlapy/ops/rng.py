"""Op family: rng (being written)."""
