"""Files written whole or not at all: a temporary name beside the target (`.NAME.PID.tmp`), and
the sweep that removes such files left by processes that were killed while writing."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["temporary_beside", "sweep_stale_temporaries"]

_TEMPORARY = re.compile(r"^\..+\.(\d+)\.tmp$")


def temporary_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # (another user's process)
        return True
    return True


def sweep_stale_temporaries(folder: Path) -> None:
    """Remove `.NAME.PID.tmp` files in `folder` whose writer no longer runs (killed mid-write: a
    signal it could not catch), so interrupted exports and cache writes leave nothing behind."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        m = _TEMPORARY.match(entry.name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            try:
                os.unlink(entry.path)
            except OSError:
                pass
