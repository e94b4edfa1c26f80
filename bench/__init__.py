"""Benchmarks: speed, memory and robustness figures (`python -m bench.NAME --help`, from the
repository root). What goes where, and the rules: scripts/README.md."""
