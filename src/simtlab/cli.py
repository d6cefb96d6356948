"""The `simtlab` command line: the commands (simtlab.commands) behind one error boundary."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from .commands import EXIT_INPUT, EXIT_INTERNAL, EXIT_STORE, _message, app, console, err
# (each module registers its commands on `app`, in this order in `simtlab --help`)
from .commands import static  # noqa: F401, I001
from .commands import measure  # noqa: F401, I001
from .commands import results  # noqa: F401, I001
from .host.commands import register as _register_host

_register_host(app, console)

__all__ = ["app", "main", "EXIT_INPUT", "EXIT_STORE", "EXIT_INTERNAL"]


def _one_line(exc: Exception) -> str:
    return (_message(exc).strip().splitlines() or [type(exc).__name__])[0]


def _parser_exceptions():
    """The command-line parser's exception classes (Typer's bundled click, or click itself)."""
    import typer.core

    return (getattr(typer.core, "_click", None) or typer.core.click).exceptions


def main(argv: Optional[List[str]] = None) -> int:
    """The `simtlab` command: every error is one line on stderr naming the problem, with the exit
    codes above; `--debug` (anywhere on the line) lets the traceback through instead."""
    import sqlite3

    from .compile import CompileError
    from .device import NoGpuError
    from .store import StoreError

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"] or ["--help"]
    parser_errors = _parser_exceptions()
    try:
        code = typer.main.get_command(app).main(args=args, prog_name="simtlab", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except typer.Abort:  # (Ctrl-C inside a prompt)
        err.print("interrupted")
        return 130
    except parser_errors.ClickException as exc:  # a usage error: one line, exit 2, and where to look
        where = getattr(getattr(exc, "ctx", None), "command_path", None) or "simtlab"
        err.print(f"[red]error:[/] {exc.format_message()} (see `{where} --help`)", soft_wrap=True, highlight=False)
        return exc.exit_code if exc.exit_code else EXIT_INPUT
    except Exception as exc:
        if debug:
            raise
        if isinstance(exc, StoreError):
            err.print(f"[red]error:[/] {_one_line(exc)}", soft_wrap=True)
            return EXIT_STORE
        if isinstance(exc, sqlite3.Error):  # (a Store names its file; SQLite met outside one has no store to name)
            err.print(f"[red]error:[/] a results store could not be used: {_one_line(exc)}", soft_wrap=True)
            return EXIT_STORE
        if isinstance(exc, NoGpuError):
            from .device import NO_GPU_HINT

            err.print(f"[red]error:[/] {_one_line(exc)}; {NO_GPU_HINT}", soft_wrap=True)
            return EXIT_INPUT
        if isinstance(exc, (ValueError, TypeError, KeyError, LookupError, OSError, CompileError)):
            err.print(f"[red]error:[/] {_one_line(exc)}", soft_wrap=True)
            return EXIT_INPUT
        err.print(f"[red]internal error:[/] {type(exc).__name__}: {_one_line(exc)} (run again with --debug for "
                  "the traceback)", soft_wrap=True)
        return EXIT_INTERNAL

