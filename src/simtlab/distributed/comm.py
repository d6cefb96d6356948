"""Collectives for the distributed GEMM, behind one small interface:

* `TorchComm`: torch.distributed (NCCL between GPUs, gloo on CPUs), launched with `torchrun`;
  arrays cross as tensors through DLPack, no copies.
* `ThreadComm`: ranks as threads of one process, for testing the algorithms on a CPU.
* `SoloComm`: world size 1 (one GPU, no communication at all).

Every call takes the group as the sorted tuple of its global ranks; `broadcast` fills `array` in
place on every non-root rank and returns a handle whose `wait()` completes it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


class _Done:
    def wait(self) -> None:
        return None


class SoloComm:
    rank, size = 0, 1

    def broadcast(self, array, root: int, group: tuple[int, ...], async_op: bool = False):
        if root != 0 or group != (0,):
            raise ValueError(f"world size 1 has only rank 0, got root {root}, group {group}")
        return _Done()

    def all_gather(self, parts: list, mine) -> None:
        parts[0][...] = mine

    def barrier(self) -> None:
        return None


@dataclass
class _Board:
    """What ThreadComm's ranks share: one slot per (group, call number)."""

    size: int
    cond: threading.Condition = field(default_factory=threading.Condition)
    slots: dict = field(default_factory=dict)
    barrier: threading.Barrier | None = None

    def __post_init__(self):
        self.barrier = threading.Barrier(self.size)


class ThreadComm:
    """One rank of an in-process world; make the whole world with `ThreadComm.world(n)`."""

    def __init__(self, board: _Board, rank: int):
        self.board, self.rank, self.size = board, rank, board.size
        self._calls: dict[tuple[int, ...], int] = {}

    @classmethod
    def world(cls, size: int) -> list["ThreadComm"]:
        board = _Board(size)
        return [cls(board, r) for r in range(size)]

    def _key(self, group: tuple[int, ...]):
        n = self._calls.get(group, 0)
        self._calls[group] = n + 1
        return group, n

    def broadcast(self, array, root: int, group: tuple[int, ...], async_op: bool = False):
        if self.rank not in group or root not in group:
            raise ValueError(f"rank {self.rank} / root {root} not in group {group}")
        key = self._key(group)
        with self.board.cond:
            if self.rank == root:
                copy = array.clone() if hasattr(array, "clone") else array.copy()  # (PyTorch or NumPy)
                self.board.slots[key] = [copy, len(group) - 1]
                self.board.cond.notify_all()
            else:
                self.board.cond.wait_for(lambda: key in self.board.slots, timeout=60)
                slot = self.board.slots.get(key)
                if slot is None:
                    raise TimeoutError(f"rank {self.rank}: no broadcast from {root} in group {group}")
                array[...] = slot[0]
                slot[1] -= 1
                if slot[1] == 0:
                    del self.board.slots[key]
        return _Done()

    def all_gather(self, parts: list, mine) -> None:
        """parts[r] receives rank r's `mine` (all ranks take part)."""
        group = tuple(range(self.size))
        for r in range(self.size):
            self.broadcast(mine if r == self.rank else parts[r], r, group)
            if r == self.rank:
                parts[r][...] = mine

    def barrier(self) -> None:
        self.board.barrier.wait()


class TorchComm:
    """torch.distributed after `init_process_group` (NCCL for CUDA arrays, gloo for CPU ones)."""

    def __init__(self):
        import torch.distributed as dist

        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised: launch with torchrun and call "
                               "simtlab.distributed.gemm.init() first")
        self.dist = dist
        self.rank, self.size = dist.get_rank(), dist.get_world_size()
        self._groups: dict[tuple[int, ...], object] = {}

    def group(self, ranks: tuple[int, ...]):
        """Every rank must create every group in the same order (torch's rule): SUMMA asks for all
        row and column groups up front through `groups()`."""
        if ranks not in self._groups:
            self._groups[ranks] = self.dist.new_group(list(ranks))
        return self._groups[ranks]

    @staticmethod
    def _tensor(array):
        import torch

        return torch.from_dlpack(array) if not isinstance(array, torch.Tensor) else array

    def broadcast(self, array, root: int, group: tuple[int, ...], async_op: bool = False):
        work = self.dist.broadcast(self._tensor(array), src=root, group=self.group(group), async_op=async_op)
        return work if async_op else _Done()

    def all_gather(self, parts: list, mine) -> None:
        self.dist.all_gather([self._tensor(p) for p in parts], self._tensor(mine))

    def barrier(self) -> None:
        self.dist.barrier()
