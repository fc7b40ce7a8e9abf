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

from typing import Any

from typer.core import TyperCommand, TyperGroup

from .plain import NOT_PLAIN, handled, plain_value

try:  # typer's converter interface (typer 0.29); without it typer converts as it always does
    from typer._coercion import RuntimeParam, build_runtime_param
except ImportError:  # pragma: no cover  # another typer: everything goes through pydantic
    RuntimeParam = None  # type: ignore[assignment,misc]

if RuntimeParam is not None:

    class _Plain(RuntimeParam):  # typer's converter interface (a frozen dataclass)
        """The plain spellings here; the rest through typer's own converter, built on first need."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            info = self.parameter_info
            case_sensitive = getattr(info, "case_sensitive", True)
            if case_sensitive and ctx.token_normalize_func is None:
                found = plain_value(self.annotation, info.min, info.max, value)
                if found is not NOT_PLAIN:
                    return found
            return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)


def _plainly(param: Any) -> None:
    """Give one parameter the plain converter, where its kind is one it handles."""
    descriptor = getattr(param, "type_descriptor", None)
    if RuntimeParam is None or descriptor is None or descriptor.file_annotation is not None:
        return
    info = descriptor.parameter_info
    if info.parser is None and not getattr(info, "clamp", False) and handled(descriptor.annotation):
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
