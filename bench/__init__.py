"""Scheduler benchmarks (`make bench` = `python -m bench`)."""
