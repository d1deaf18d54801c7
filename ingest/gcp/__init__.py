"""ingest.gcp: the Google Cloud sources (docs/sources/gcp.md)."""
