"""Op family: control_flow (being written)."""
