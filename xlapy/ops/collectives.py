"""Op family: collectives (being written)."""
