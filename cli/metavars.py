"""What the help shows for an option's value: a word a person reads (FILE, N, ISO-TIME), never typer's
type names (`<str>`, `<int range>`, `<list[str]>`). One table for every command: a value's metavar
comes from what it names (an option's flag), else from its type; a metavar declared with the option
(`--rules VERSION`) and a list of choices are kept as they are."""

from __future__ import annotations

from typing import Any

# What the value names, by flag: the same word wherever the flag appears.
BY_FLAG: dict[str, str] = {
    **dict.fromkeys(("--output", "--ledger", "--report-json", "--prices", "--settings", "--session-memory", "--svg", "--from"), "FILE"),
    **dict.fromkeys(("--out-dir", "--root", "--cwd"), "DIR"),
    **dict.fromkeys(("--now", "--start-time"), "ISO-TIME"),
    **dict.fromkeys(("--base-url", "--scheduler"), "URL"),
    "--model": "MODEL",
    "--program": "COMMAND",
    "--instructions": "TEXT",
    "--tools": "NAME,…",
    "--backup": "SUFFIX",
    "--before": "UUID",
    "--range": "A..B",
    "--session-id": "UUID",
    "--autocompact-pct": "PERCENT",
    "--keep-fraction": "FRACTION",
    "--gap-minutes": "MINUTES",
    "--timeout": "SECONDS",
}
# Else by the value's type (its annotation, as typer names it).
BY_TYPE: dict[str, str] = {"int": "N", "float": "NUMBER", "str": "TEXT"}
# A command's transcripts: a file, a folder, a store URL, or '-' for stdin.
ARGUMENTS: dict[str, str] = {"path": "PATH", "paths": "PATH"}


def _no_type(ctx: Any) -> None:
    return None


def readable(command: Any) -> Any:
    """`command` (a click command typer made) with a readable metavar on every value that has none."""
    for param in command.params:
        if param.metavar is not None or getattr(param, "is_flag", False) or param.type_descriptor.is_choice:
            continue
        if param.param_type_name == "argument":
            param.metavar = ARGUMENTS.get(param.name or "")
            # typer lists an argument as its name and then its type (`PATH <list[str]>`): the name says it.
            setattr(param, "display_type_rich", _no_type)  # noqa: B010  # on this one parameter, not the class
            continue
        flag = next((name for name in param.opts if name.startswith("--")), None)
        param.metavar = BY_FLAG.get(flag or "") or BY_TYPE.get(param.bare_type())
    return command
