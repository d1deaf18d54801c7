"""Schema version 15, frozen as it shipped: never edit it.

``stored_results``: what the dashboard's pages read that is dear to compute (the cost forecast and anomaly
fits, the heaviest page queries), computed by the job that loads the data and stored with the fingerprint
of the data it was computed on (a reader uses a row only while that fingerprint is current).
"""

VERSION = 15

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS stored_results (
  "name" VARCHAR,
  "scope" VARCHAR,
  "data_version" VARCHAR,
  "computed_at" TIMESTAMPTZ,
  "seconds" DOUBLE,
  "frame" BLOB
)""",
)
