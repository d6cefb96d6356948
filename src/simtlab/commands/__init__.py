"""The `simtlab` commands, grouped by what they need: `static` (no GPU: the catalog, compiled code
and its analyses), `measure` (a GPU: ladders, tuning, sanitizers, profiles) and `results` (the
store: queries, reports, comparisons). This module holds the app and what every command shares;
`simtlab.cli` is the entry point and its error boundary."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from ..catalog import family as get_family

# (rich_markup_mode None: plain help - flags without a "<bool>" column - and errors as one line, see cli.main)
app = typer.Typer(help="simtlab: hand-written CUDA kernels, verified, timed, explained.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
console = Console()
err = Console(stderr=True)

# Exit codes: 0 success, 1 a detected regression (`compare`) or a failed check, 2 a usage or input
# error, 3 a damaged or unreadable results store, 4 anything unexpected (--debug shows its traceback).
EXIT_INPUT, EXIT_STORE, EXIT_INTERNAL = 2, 3, 4


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[red]error:[/] {message}", soft_wrap=True)
    raise typer.Exit(code)


def _message(exc: Exception) -> str:
    """An exception as the command line says it: a KeyError's text unquoted, and where there is no
    GPU, what still works without one."""
    from ..device import NO_GPU_HINT, NoGpuError

    if isinstance(exc, NoGpuError):
        return f"{exc}; {NO_GPU_HINT}"
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def _target(fam, arch: Optional[str], rung_keys) -> tuple:
    """The architecture to build for (this GPU's unless given) and the chosen rungs (None: all)."""
    from ..compile import normalise_arch
    from ..device import NoGpuError

    try:
        rungs = [fam.rung(r) for r in rung_keys] if rung_keys else None
        return normalise_arch(arch), rungs
    except (NoGpuError, ValueError, KeyError) as exc:
        _fail(_message(exc) + ("" if arch or isinstance(exc, NoGpuError) else " (or pass --arch sm_90)"))


def _output_file(path: Path, suffixes: tuple[str, ...], what: str) -> Path:
    """A file a command will write, checked before any work: its suffix names the format, and its
    folder exists and can be written."""
    if path.suffix.lower() not in suffixes:
        _fail(f"{path}: {what} is written as {' or '.join(suffixes)}: give a path ending in {suffixes[0]}")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        _fail(f"cannot write {path}: the folder {folder} does not exist")
    if not _writable(folder) or (path.exists() and not _writable(path)):
        _fail(f"cannot write {path}: {'the file' if path.exists() else 'its folder'} is not writable")
    return path


def _writable(path: Path) -> bool:
    import os

    return os.access(path, os.W_OK)


def _output_folder(path: Path) -> Path:
    """A folder a command will write pages into, checked (and made) before any work."""
    if path.exists() and not path.is_dir():
        _fail(f"{path} is a file: give a folder for the pages")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _fail(f"cannot make the folder {path}: {exc.strerror}")
    if not _writable(path):
        _fail(f"cannot write into {path}: the folder is not writable")
    return path


def _known_runs(store, runs) -> None:
    """Run ids a command was asked for that the store does not hold, named (not an empty answer)."""
    if not runs:
        return
    held = store.run_ids()
    missing = [r for r in runs if r not in held]
    if missing:
        span = f"its runs are {min(held)} to {max(held)}" if held else "it holds no runs"
        _fail(f"no run {', '.join(map(str, missing))} in {store.path} ({span}; `simtlab results --runs` lists them)")


def _known_device(store, name: Optional[str]) -> None:
    if name is None:
        return
    devices = store.devices()
    if name not in devices:
        _fail(f"no runs of device {name!r} in {store.path}; its devices: {', '.join(devices) or 'none'}")


def _existing_store(db: Optional[Path], first: str = "simtlab ladder FAMILY"):
    """The results store at `db` (or the default), refusing clearly where none exists yet."""
    from ..store import Store, default_path

    path = db or default_path()
    if not Path(path).exists():
        _fail(f"no results database at {path} yet: run `{first}` first")
    return Store(path, readonly=True)


class _Steps:
    """A progress bar on stderr, one step a rung, shown only on a terminal (gone once done):
    `with _Steps(n, "compiling") as step: work(on_rung=step)`."""

    def __init__(self, total: int, what: str):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal)
        self.what, self.total, self.task, self.started = what, total, None, False

    def __enter__(self):
        self.progress.__enter__()
        self.task = self.progress.add_task(self.what, total=self.total)
        return self

    def __call__(self, rung) -> None:
        """The next rung starts (so the one before it is done)."""
        self.progress.update(self.task, advance=int(self.started), description=f"{self.what} {rung.id}")
        self.started = True

    def finished(self, label: str) -> None:
        """One step done (steps that run side by side report as they end)."""
        self.progress.update(self.task, advance=1, description=f"{self.what} ({label} done)")

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)


def _command_line() -> str:
    return " ".join(["simtlab"] + [shlex.quote(a) for a in sys.argv[1:]])


def _family(name: str):
    try:
        return get_family(name)
    except KeyError as exc:
        _fail(exc.args[0])
