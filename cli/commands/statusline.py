"""`ctxpipe statusline` as the typer app sees it: listed in `ctxpipe --help`, and run in-process
(the library's tests, cli/app.main(argv)). Its flags are parsed once, by cli/statusline.py: a real
`ctxpipe statusline` never reaches typer (cli/entry.py sends it there first)."""

from __future__ import annotations

import typer

# Every argument, --help included, goes to cli/statusline.py's parser untouched.
SETTINGS = {"context_settings": {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}, "add_help_option": False}


def statusline(context: typer.Context) -> None:
    """Print one status line for Claude Code from the JSON it writes on stdin (its statusLine setting)."""
    from ..statusline import with_standard_streams

    status = with_standard_streams(context.args)
    if status:
        raise typer.Exit(status)
