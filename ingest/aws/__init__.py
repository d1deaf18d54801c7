"""ingest.aws: the AWS sources (docs/sources/aws.md)."""
