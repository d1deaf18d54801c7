"""Schema version 2, frozen as it shipped (commit 143455227413): never edit it.

The AWS spot advisor's interruption-frequency bands.
"""

VERSION = 2

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS spot_interruption_bands (
  "provider" VARCHAR,
  "region" VARCHAR,
  "os" VARCHAR,
  "instance_type" VARCHAR,
  "band_index" INTEGER,
  "band_label" VARCHAR,
  "band_max_pct" INTEGER,
  "savings_pct" INTEGER,
  "source" VARCHAR,
  "updated_at" TIMESTAMPTZ
)""",
)
