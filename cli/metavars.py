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
# A command's arguments: its transcripts (a file, a folder, a store URL, or '-' for stdin), hooks' action.
ARGUMENTS: dict[str, str] = {"path": "PATH", "paths": "PATH", "action": "ACTION"}
# After an argument that takes any number of values: `PATH…`, in the usage line as in the list.
MANY = "…"
# The transcripts argument as usage errors name it (`Invalid value for PATH…: …`), as the help shows it.
PATHS = ARGUMENTS["paths"] + MANY


def _no_type(ctx: Any) -> None:
    return None


def readable(command: Any) -> Any:
    """`command` (a click command typer made) with a readable metavar on every value that has none."""
    for param in command.params:
        if param.param_type_name == "argument" and param.metavar is None:
            _readable_argument(param)
            continue
        if param.metavar is not None or getattr(param, "is_flag", False) or param.type_descriptor.is_choice:
            continue
        flag = next((name for name in param.opts if name.startswith("--")), None)
        param.metavar = BY_FLAG.get(flag or "") or BY_TYPE.get(param.bare_type())
    return command


def _readable_argument(param: Any) -> None:
    """An argument as a person reads it: `[PATH…]` in the usage line (typer's own: `[PATH]...`, and
    `{action}` for a required one), `PATH…` in the list, with its choices (`ACTION <install|uninstall>`)
    but never a type name (`PATH <list[str]>`: the name says it)."""
    param.metavar = ARGUMENTS.get(param.name or "", (param.name or "").upper()) + (MANY if param.nargs != 1 else "")
    usage = param.metavar if param.required else f"[{param.metavar}]"
    # On this one parameter, not the class: typer's names stay as they are for anything else.
    setattr(param, "_usage_display_name", lambda: usage)  # noqa: B010
    if not param.type_descriptor.is_choice:
        setattr(param, "display_type_rich", _no_type)  # noqa: B010
