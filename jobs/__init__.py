"""gpufinops: jobs."""
