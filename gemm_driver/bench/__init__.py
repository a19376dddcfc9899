"""Benchmarking: timing, environment record, the sweep, and reports."""
