"""The `simtlab` console script: the command line imported and run inside one guard, so Ctrl-C
at any moment - during the imports too, in a command's first fraction of a second - ends with
one line and exit status 130, never a traceback."""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


def entry() -> None:  # pragma: no cover - the console script (tests run it in a child process)
    try:
        from .cli import main

        code = main()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        code = EXIT_INTERRUPTED
    sys.exit(code)
