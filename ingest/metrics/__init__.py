"""ingest.metrics: the GPU utilisation sources (docs/sources/utilisation.md)."""
