"""Azure's source types: Cost Management FocusCost exports (``azure_cost_export``) and the Retail Prices API."""
