"""Schema version 18, frozen as it shipped: never edit it.

``cost_line_items.x_ProviderColumns``: a provider's own ``x_`` columns of a line, as one JSON object (Azure's
FocusCost exports carry about forty: ``x_SkuMeterCategory``, ``x_SkuDetails``, ``x_ResourceGroupName`` …), kept
as delivered. Lines loaded before this version, and sources that carry none, hold NULL.
"""

VERSION = 18

STATEMENTS: tuple[str, ...] = ("""ALTER TABLE cost_line_items ADD COLUMN IF NOT EXISTS "x_ProviderColumns" VARCHAR""",)
