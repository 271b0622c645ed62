"""Corrections to history: invalidating or deleting a bad run."""
