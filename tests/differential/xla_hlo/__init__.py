"""Issue 20: XLA's own HLO (unoptimized and optimized) run natively on the cpu backend."""
