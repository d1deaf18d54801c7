"""ingest.metrics: see ingest/README section in the top-level README."""
