"""Wrappers around NVIDIA's command-line tools (Nsight Compute, compute-sanitizer)."""
