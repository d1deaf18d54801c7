"""gpufinops: ingest."""
