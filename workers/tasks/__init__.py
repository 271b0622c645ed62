"""Celery tasks: each wraps one job of ``app`` (tested there) under its task name."""
