"""Option values converted without pydantic, where that gives typer's own result.

typer converts every option's text through a pydantic TypeAdapter, and importing pydantic and
building the adapters costs several times what the rest of a small command does. `Command` (the
class of each ctxpipe command) gives the options of the kinds ctxpipe declares (str, bool, int,
float, an Enum's values, a list of str) a converter that takes the plain spellings itself: a whole number,
a decimal number, a choice's exact value. Anything else (a bad value, a number out of range, "1e3"
for an int) goes to typer's pydantic converter, so the value or the error is typer's, word for word.
tests/test_cli_coercion.py runs both on the same values.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

from typer.core import TyperCommand, TyperGroup

try:  # typer's converter interface (typer 0.29); without it typer converts as it always does
    from typer._coercion import RuntimeParam, build_runtime_param
except ImportError:  # pragma: no cover  # another typer: everything goes through pydantic
    RuntimeParam = None  # type: ignore[assignment,misc]

_WHOLE = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_PLAIN = object()  # not a plain spelling: typer's converter decides


def _number(kind: type, value: Any) -> Any:
    if isinstance(value, bool):
        return _PLAIN
    if kind is int:
        if isinstance(value, int):
            return value
        return int(value) if isinstance(value, str) and _WHOLE.fullmatch(value) else _PLAIN
    if isinstance(value, (int, float)):
        return float(value)
    return float(value) if isinstance(value, str) and _DECIMAL.fullmatch(value) else _PLAIN


def _plain(annotation: Any, low: Any, high: Any, value: Any) -> Any:
    """`value` as typer's converter would give it, or _PLAIN where only that converter can say."""
    if annotation is str:
        return value if isinstance(value, str) else _PLAIN
    if annotation is bool:
        return value if isinstance(value, bool) else _PLAIN
    if annotation in (int, float):
        number = _number(annotation, value)
        if number is _PLAIN or (low is not None and number < low) or (high is not None and number > high):
            return _PLAIN
        return number
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        if isinstance(value, annotation):
            return value
        return next((member for member in annotation if isinstance(value, str) and member.value == value), _PLAIN)
    if getattr(annotation, "__origin__", None) is list and getattr(annotation, "__args__", None) == (str,):
        return list(value) if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value) else _PLAIN
    return _PLAIN


def _handled(annotation: Any) -> bool:
    if annotation in (str, bool, int, float):
        return True
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return True
    return getattr(annotation, "__origin__", None) is list and getattr(annotation, "__args__", None) == (str,)


if RuntimeParam is not None:

    class _Plain(RuntimeParam):  # typer's converter interface (a frozen dataclass)
        """The plain spellings here; the rest through typer's own converter, built on first need."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            info = self.parameter_info
            case_sensitive = getattr(info, "case_sensitive", True)
            if case_sensitive and ctx.token_normalize_func is None:
                found = _plain(self.annotation, info.min, info.max, value)
                if found is not _PLAIN:
                    return found
            return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)


def _plainly(param: Any) -> None:
    """Give one parameter the plain converter, where its kind is one it handles."""
    descriptor = getattr(param, "type_descriptor", None)
    if RuntimeParam is None or descriptor is None or descriptor.file_annotation is not None:
        return
    info = descriptor.parameter_info
    if info.parser is None and not getattr(info, "clamp", False) and _handled(descriptor.annotation):
        param._runtime_param = _Plain(parameter_info=info, annotation=descriptor.annotation)


class Command(TyperCommand):
    """A ctxpipe command: typer's, with options of the plain kinds converted without pydantic."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            _plainly(param)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # made on demand, and converted like any other flag
        _plainly(option)
        return option


class Group(TyperGroup):
    """ctxpipe itself: its --help converted without pydantic too."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _plainly(option)
        return option
