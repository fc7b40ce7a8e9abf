"""A command's parameters and usage errors, declared without importing typer.

Importing typer (and the click it vendors) costs more than a small command's whole run, so the
declarations do not: `Option(...)` and `Argument(...)` take typer's arguments and only record them.
cli/typed.py hands them to typer as its own OptionInfo/ArgumentInfo when typer runs a command;
cli/direct.py reads them as they are to run a plain command line without typer.
A command raises `BadParameter` and `Exit` from here, and each path turns them into its own.
"""

from __future__ import annotations

from typing import Any

# A BadParameter's param_hint that stands for the option being checked, shown as its first name
# unquoted (a callback knows its value, not which option carried it).
THIS_OPTION = "\x00this option"


class Parameter:
    """typer.Option(*names, **settings) or typer.Argument(**settings), not yet made."""

    __slots__ = ("kind", "names", "settings")

    def __init__(self, kind: str, names: tuple[str, ...], settings: dict[str, Any]) -> None:
        self.kind = kind  # "option" or "argument"
        self.names = names
        self.settings = settings

    def __repr__(self) -> str:
        return f"{self.kind}{self.names}"


def Option(*names: str, **settings: Any) -> Any:  # typer's name, so a declaration reads as typer's
    """typer.Option's arguments (names, help=, min=, callback=, …), kept for later."""
    return Parameter("option", names, settings)


def Argument(**settings: Any) -> Any:
    """typer.Argument's arguments, kept for later."""
    return Parameter("argument", (), settings)


class BadParameter(Exception):
    """A usage error (exit 2) found by a command or an option's check: typer.BadParameter's arguments."""

    def __init__(self, message: str, param_hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param_hint = param_hint


class Exit(Exception):
    """End the command with this exit status (typer.Exit's meaning)."""

    def __init__(self, code: int = 0) -> None:
        super().__init__(code)
        self.exit_code = code
