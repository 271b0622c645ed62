"""Annotations: events on the timeline (a driver upgrade, a node swap, a known outage)."""
