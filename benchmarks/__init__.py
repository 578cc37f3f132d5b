"""Benchmarks of tl_geometry (a package: run each as ``python -m benchmarks.<name>``)."""
