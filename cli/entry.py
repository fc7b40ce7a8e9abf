"""The `ctxpipe` console entry: `statusline` starts on a light path (it runs after every message
Claude Code shows, so it must not load typer, rich or the stages); every other command goes to
cli/app.main."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["statusline"]:
        try:
            from .statusline import main as statusline
        except KeyboardInterrupt:  # Ctrl-C while starting up: quietly, with ExitStatus.INTERRUPTED
            raise SystemExit(130) from None
        statusline(sys.argv[2:])
    try:
        from .app import main as app
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    app()
