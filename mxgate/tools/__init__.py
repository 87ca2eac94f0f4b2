"""Long-running utilities behind the CLI: exhaustive sweeps and benchmarks."""
