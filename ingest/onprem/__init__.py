"""ingest.onprem: private GPU clusters (docs/sources/onprem.md)."""
