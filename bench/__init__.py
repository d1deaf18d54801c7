"""Benchmarks: figures (rows/s, seconds, peak RSS) for the heavy paths, run by `make bench`."""
