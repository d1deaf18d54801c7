"""gpufinops: dashboard."""
