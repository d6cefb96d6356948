"""Turning rows into tables (Rich) and charts (Matplotlib)."""
