"""gpufinops: models."""
