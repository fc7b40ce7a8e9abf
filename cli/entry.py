"""The `ctxpipe` console entry: `statusline` and `hook` start on a light path (Claude Code runs them
after every message and around every compaction, so they must not load typer or rich), and so does
help (cli/help.py), and so does a plain command line (cli/direct.py); anything else goes to typer, cli/app.main."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        from .. import __version__

        sys.stdout.write(f"ctxpipe {__version__}\n")
        raise SystemExit(0)
    if sys.argv[1:2] == ["statusline"]:
        try:
            from .statusline import main as statusline
        except KeyboardInterrupt:  # Ctrl-C while starting up: quietly, with ExitStatus.INTERRUPTED
            raise SystemExit(130) from None
        statusline(sys.argv[2:])
    if sys.argv[1:2] == ["hook"]:  # a hook Claude Code waits on: the same light path
        from .hook import main as hook

        hook(sys.argv[2:])
    try:
        from .help import answer

        answer(sys.argv[1:])  # help alone: answered from the stored pages, without typer (returns otherwise)
        from .direct import main as direct
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    direct(sys.argv[1:])  # a plain command line: run without typer (returns otherwise)
    try:
        from .app import main as app
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    app()
