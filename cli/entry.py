"""The `ctxpipe` console entry: `statusline` and `hook` start on a light path (Claude Code runs them
after every message and around every compaction, so they must not load typer or rich), and so does
help (cli/help.py), and so does a plain command line (cli/direct.py); anything else goes to typer, cli/app.main."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable

from .version import VERSION_FLAGS, print_version


def main() -> None:
    if len(sys.argv) == 2 and sys.argv[1] in VERSION_FLAGS:
        print_version()
    if sys.argv[1:2] == ["statusline"]:
        try:
            from .statusline import main as statusline
        except KeyboardInterrupt:  # Ctrl-C while starting up: quietly, with ExitStatus.INTERRUPTED
            raise SystemExit(130) from None
        statusline(sys.argv[2:])
    if sys.argv[1:2] == ["hook"]:  # a hook Claude Code waits on: the same light path
        from .hook import main as hook

        hook(sys.argv[2:])
    # Start-up allocates tens of thousands of objects (modules, classes, dataclasses' methods) and
    # none is garbage: a cyclic collection every 700 of them is wasted work (2-3 ms of a small
    # command's run). Collection resumes once the command is loaded (cli/direct.py), before typer
    # runs one, and on any way out.
    gc.disable()
    try:
        app = _load(sys.argv[1:])
    finally:
        gc.enable()
    app()


def _load(argv: list[str]) -> Callable[[], None]:
    """Answer help, or run a plain command line, here; else typer's app, loaded."""
    try:
        from .help import answer

        answer(argv)  # help alone: answered from the stored pages, without typer (returns otherwise)
        from .direct import main as direct
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    direct(argv)  # a plain command line: run without typer (returns otherwise)
    try:
        from .app import main as app
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    return app
