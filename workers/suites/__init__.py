"""The built-in benchmark suite: operators now; the 12 model categories build on the harness."""
