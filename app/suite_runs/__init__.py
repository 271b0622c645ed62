"""Suite runs of the benchmark workers: a run fanned out into shards, then closed."""
