"""Several GPUs: GEMM partitioned over ranks (1D row panels, 2D SUMMA) with collectives through a
standard backend (torch.distributed: NCCL between GPUs, gloo on CPUs for tests), and tuning work
spread over one measuring worker per GPU."""
