"""Budgets that hold: the quotas of models/budget_quota.py as scheduler objects, diffed, applied, replayed."""
