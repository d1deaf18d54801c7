"""ingest.aws: see ingest/README section in the top-level README."""
