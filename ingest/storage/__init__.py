"""The storage inventory around GPU work: block volumes, snapshots, objects under configured bucket prefixes
and their measured operations (AWS: ingest/storage/aws_inventory.py; Google Cloud: gcp_inventory.py)."""
