"""Offline model zoo (placeholder: filled in by the foundation work)."""
