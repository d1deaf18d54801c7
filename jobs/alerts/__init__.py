"""Budgets and alerts: settings ([[budgets]], [alerts]), the run (evaluate, record, deliver), rendering and delivery."""
