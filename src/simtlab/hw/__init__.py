"""What a compiled kernel uses (registers, shared and local memory, from NVRTC's log and the cubin)
and what an SM can hold of it (occupancy, per-architecture limits): the models that compile,
launch and the analyses below them share, importing nothing of simtlab."""
