"""typer's own help pages, rendered from the command declarations; and their stored form, help_pages.py.

`render_help` is the one function that renders a command's help: what `ctxpipe [COMMAND] --help`
prints at a terminal width. The start-up path (cli/help.py) answers `--help` without typer from
help_pages.py, which `write_pages` generates from the same declarations: every call typer makes to
click's HelpFormatter, recorded at each width click can choose, so cli/help.py replays them with a
copy of that formatter. tests/test_help.py checks that the stored pages are current and that both
print the same bytes at every width.

    python -m ctxpipe.cli.help_render      # regenerate cli/help_pages.py after changing a command
    cog -r docs/commands/*.md              # and the help blocks of the docs (cogapp, in the test extra)

`help_markdown` is what those blocks hold: the page at an 80-column terminal, fenced, so the docs show
exactly what `--help` prints (tests/test_docs.py fails when they differ).
"""

from __future__ import annotations

import pprint
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from typer._click import Command, Context
from typer._click.formatting import HelpFormatter
from typer.core import TyperGroup as Group
from typer.main import get_command

from .help import BY_WIDTH, MAX_WIDTH, MIN_WIDTH

PAGES = Path(__file__).with_name("help_pages.py")
WIDTHS = range(MIN_WIDTH, MAX_WIDTH + 1)  # every width click's formatter can take: terminal columns − 2, within 50..78


def _root() -> Group:
    from .app import app

    command = get_command(app)
    assert isinstance(command, Group)
    return command


def _context(path: Sequence[str], width: int, root: Group | None = None) -> tuple[Command, Context]:
    """The command at `path` ([] for ctxpipe itself) and the context typer would give it."""
    command: Command = root or _root()
    context = Context(command, info_name="ctxpipe", terminal_width=width, **command.context_settings)
    for name in path:
        assert isinstance(command, Group)
        found = command.get_command(context, name)
        if found is None:
            raise KeyError(name)
        command = found
        context = Context(command, info_name=name, parent=context, **command.context_settings)  # as make_context does
    return command, context


def render_help(path: Sequence[str], width: int) -> str:
    """The help page `ctxpipe *path --help` prints when click formats at `width` (50..78: the terminal's
    columns − 2), without the final newline."""
    command, context = _context(path, width)
    return command.get_help(context)


def help_markdown(name: str = "") -> str:
    """The fenced help page of command `name` ("" for ctxpipe's own), as docs/commands/ hold it:
    what `ctxpipe name --help` prints (statusline answers it on its own light path, cli/entry.py)."""
    if name == "statusline":
        from .statusline import HELP

        return "```text\n" + HELP.rstrip("\n") + "\n```\n"
    return "```text\n" + render_help([name] if name else [], MAX_WIDTH) + "\n```\n"


def command_names() -> list[str]:
    """The commands `ctxpipe --help` lists, in its order."""
    root = _root()
    return list(root.list_commands(Context(root, info_name="ctxpipe")))


class _Recorder(HelpFormatter):
    """A HelpFormatter that writes nothing and keeps every call typer makes, for replaying."""

    def __init__(self, width: int) -> None:
        super().__init__(width=width)
        self.calls: list[tuple[Any, ...]] = []

    def write(self, string: str) -> None:
        self.calls.append(("write", string))

    def indent(self) -> None:
        self.calls.append(("indent",))

    def dedent(self) -> None:
        self.calls.append(("dedent",))

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        self.calls.append(("write_usage", prog, args, prefix))

    def write_heading(self, heading: str) -> None:
        self.calls.append(("write_heading", heading))

    def write_paragraph(self) -> None:
        self.calls.append(("write_paragraph",))

    def write_text(self, text: str) -> None:
        self.calls.append(("write_text", text))

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        self.calls.append(("write_dl", tuple(tuple(row) for row in rows), col_max, col_spacing))


def _calls(path: Sequence[str], width: int, root: Group) -> list[tuple[Any, ...]]:
    command, context = _context(path, width, root)
    recorder = _Recorder(width)
    context.formatter_class = lambda **_: recorder  # type: ignore[assignment]  # make_formatter's keywords: the width is the recorder's
    command.format_help(context, recorder)
    return recorder.calls


def _merged(values: Sequence[Any]) -> Any:
    """One value for all widths where they agree, else (BY_WIDTH, runs...); tuples merged item by item (a
    commands list shortens each command's summary to the width, and only that summary varies)."""
    first = values[0]
    if all(value == first for value in values):
        return first
    if all(isinstance(value, tuple) and len(value) == len(first) for value in values):
        return tuple(_merged([value[i] for value in values]) for i in range(len(first)))
    runs: list[tuple[int, Any]] = []
    for width, value in zip(WIDTHS, values):
        if not runs or runs[-1][1] != value:
            runs.append((width, value))
    return (BY_WIDTH, *runs)


def pages() -> dict[str, tuple[tuple[Any, ...], ...]]:
    """Each command's help ("" for ctxpipe's own) as its formatter calls, merged over the widths."""
    root = _root()
    found = {}
    for name in ["", *command_names()]:
        path = [name] if name else []
        by_width = [_calls(path, width, root) for width in WIDTHS]
        if len({len(calls) for calls in by_width}) != 1:
            raise ValueError(f"{name or 'ctxpipe'}: typer makes different calls at different widths; cli/help.py cannot replay them")
        found[name] = tuple(_merged([calls[i] for calls in by_width]) for i in range(len(by_width[0])))
    return found


def source() -> str:
    """help_pages.py's text."""
    body = pprint.pformat(pages(), width=160, sort_dicts=False)
    return (
        '"""Generated by `python -m ctxpipe.cli.help_render` from the command declarations: do not edit.\n'
        'Each command\'s help page as the calls typer makes to click\'s HelpFormatter (cli/help.py replays them)."""\n\n'
        "# fmt: off\n"
        f"PAGES = {body}\n"
        "# fmt: on\n"
    )


def write_pages() -> bool:
    """Regenerate help_pages.py; whether it changed."""
    text = source()
    if PAGES.exists() and PAGES.read_text(encoding="utf-8") == text:
        return False
    PAGES.write_text(text, encoding="utf-8")
    return True


if __name__ == "__main__":
    print(f"{PAGES}: {'written' if write_pages() else 'up to date'}")
