"""ingest.core: the registry, option specs and load path every source shares (docs/sources/loads.md)."""
