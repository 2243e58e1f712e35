"""The benchmark scripts (``python scripts/benchmarks/bench_NAME.py``), importable as ``benchmarks.bench_NAME`` from ``scripts/``."""
