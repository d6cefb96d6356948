"""Library implementations timed beside the rungs (optional dependencies)."""
