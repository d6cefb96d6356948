"""Wave quantization: how a grid's work units fall into rounds of the GPU's concurrent slots.

512 output tiles on 132 SMs that each hold one block run in 4 rounds, the last with 116 tiles:
16 SMs idle for a quarter of the kernel, 3% of its time, however fast each tile is. A persistent
kernel has the same rounds with its own units (tiles, or a cluster's tiles) over its blocks.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

__all__ = ["Waves", "waves"]


@dataclass(frozen=True)
class Waves:
    units: int  # blocks of a one-shot grid, or the tiles (cluster tiles) a persistent grid walks
    slots: int  # units that run at once: SMs x blocks per SM, or a persistent grid's blocks (clusters)

    @property
    def rounds(self) -> float:
        return self.units / self.slots

    @property
    def idle_share(self) -> float:
        """Share of slot-time left idle if every unit takes the same time: the last round's gap."""
        return 1.0 - self.units / (math.ceil(self.rounds) * self.slots)

    def as_dict(self) -> dict:
        return {**asdict(self), "rounds": self.rounds, "idle_share": self.idle_share}


def waves(rung, params, problem, grid_blocks: int, blocks_per_sm: int, sms: int) -> Waves | None:
    """The rounds of one rung's launch on a GPU of `sms` SMs; None when no block fits on an SM.
    Persistent rungs name their own units (`Rung.work`)."""
    persistent = rung.work_units(params, problem, sms)
    if persistent is not None:
        return Waves(*persistent)
    if blocks_per_sm < 1:
        return None
    return Waves(grid_blocks, sms * blocks_per_sm)
