"""Uploads of the result files other tools write (PyTorch's, pytest-benchmark, Google Benchmark)."""
