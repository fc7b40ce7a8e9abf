"""Command-line options from declarations: a flag is declared once and expanded where it is used.

Two kinds of declaration become command parameters here (cli/declare.py's, which typer and the
direct path both read):
- a settings dataclass of the core's (core.setting.Flag on each field, neutral: the core does not import typer):
  a stage's settings, api-edits' ApiEditsOptions;
- a bundle of the CLI's own options (a dataclass whose fields are `Annotated[..., declare.Option(...)]`,
  e.g. the input/output options every stage shares).

`with_options(name=Bundle, ...)` expands each dataclass into keyword parameters of a command (a
DeclaredCommand, whose `__signature__` typer reads) and hands the command one instance per name, as
sqlite-utils' @output_options does for click.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Annotated, Any, Optional, TypeVar

from ..core.setting import Flag, flag_of
from . import declare
from .options import choice_enum, existing_folder, iso_time, percentage, price_table, readable_file

Command = TypeVar("Command", bound=Callable[..., Any])


# --- what a flag's text becomes (Flag.parse), checked while the command line is parsed --------------


def _names(value: str | None) -> frozenset[str] | None:
    """--tools as a set of names, warning about the ones never cleared."""
    if value is None:
        return None
    from ..core.microcompact import never_cleared
    from . import streams

    chosen = frozenset(name.strip() for name in value.split(",") if name.strip())
    for name in sorted(chosen):
        if never_cleared(name):
            streams.warn(f"--tools: {name} results are never cleared (a subagent or MCP result cannot be reproduced)")
    return chosen  # given but naming no tool (--tools ","): nothing is cleared, as before


def _span(value: str | None) -> tuple[str, str] | None:
    if value is None:
        return None
    if ".." not in value:
        raise declare.BadParameter("expected A..B")
    start, end = value.split("..", 1)
    return (start.strip(), end.strip())


def _turns(value: str | None) -> int | str | None:
    """--thinking-keep: 'all' or a whole number of turns, as core.api_edits reads it."""
    if value is None:
        return None
    from ..core.api_edits import parse_thinking_keep

    try:
        return parse_thinking_keep(value)
    except ValueError as exc:
        # Named by a hint, not by the parameter: the message api-edits has always printed (no quotes).
        raise declare.BadParameter(str(exc), param_hint=declare.THIS_OPTION) from None


PARSERS: dict[str, Callable[..., Any]] = {
    "time": iso_time,
    "names": _names,
    "span": _span,
    "prices": price_table,
    "file": readable_file,
    "folder": existing_folder,
    "percentage": percentage,
    "turns": _turns,
}
# What the user types for a flag whose value is converted (the field holds the result).
TYPED_AS: dict[str, type] = {"time": str, "names": str, "span": str, "prices": str, "file": str, "folder": str, "percentage": float, "turns": str}


# --- settings fields and bundle fields as parameters ------------------------------------------------

_CHOICES: dict[tuple[str, tuple[str, ...]], type[Enum]] = {}


def choices(flag: Flag) -> type[Enum]:
    """One Enum per flag with choices, so typer lists and checks them."""
    key = (flag.name, flag.choices)
    if key not in _CHOICES:
        _CHOICES[key] = choice_enum(flag.name.strip("-").title().replace("-", ""), flag.choices)
    return _CHOICES[key]


def _optional(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation)


def _setting_parameter(item: dataclasses.Field[Any], annotation: Any, flag: Flag) -> inspect.Parameter:
    optional = _optional(annotation)
    if flag.choices:
        base: Any = choices(flag)
        default = None if item.default is None else base(item.default)
    elif flag.repeatable:
        # typer takes a repeated option as a list, None when not given; build() makes it the field's tuple.
        base, optional, default = types.GenericAlias(list, (typing.get_args(annotation)[0],)), True, None
    else:
        base = TYPED_AS.get(flag.parse or "") or (next(a for a in typing.get_args(annotation) if a is not type(None)) if optional else annotation)
        default = item.default
    names = [f"{flag.name}/{flag.off}" if flag.off else flag.name] + ([flag.short] if flag.short else [])
    option = declare.Option(
        *names,
        help=flag.help,
        metavar=flag.metavar,
        min=flag.min,
        max=flag.max,
        show_default=default is not None,
        callback=PARSERS[flag.parse] if flag.parse else None,
    )
    return inspect.Parameter(item.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[Optional[base] if optional else base, option])


def parameters(declaration: type, skip: Iterable[str] = ()) -> list[inspect.Parameter]:
    """The keyword parameters a settings or bundle dataclass declares (fields without a flag, and `skip`, left out)."""
    hints = typing.get_type_hints(declaration, include_extras=True)
    found = []
    for item in dataclasses.fields(declaration):
        if item.name in skip:
            continue
        flag = flag_of(item)
        if flag is not None:
            found.append(_setting_parameter(item, hints[item.name], flag))
        elif typing.get_origin(hints[item.name]) is Annotated:  # a CLI bundle field: already an option
            default = item.default if item.default is not dataclasses.MISSING else None
            found.append(inspect.Parameter(item.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hints[item.name]))
    return found


def build(declaration: type, values: Mapping[str, Any]) -> Any:
    """An instance of the dataclass from the parsed values of its parameters (choices as their text,
    a repeated flag's values as a tuple)."""
    given = {}
    for item in dataclasses.fields(declaration):
        if item.name in values:
            value = values[item.name]
            flag = flag_of(item)
            if flag is not None and flag.choices and isinstance(value, Enum):
                value = value.value
            elif flag is not None and flag.repeatable:
                value = tuple(value or ())
            given[item.name] = value
    return declaration(**given)


@dataclasses.dataclass(frozen=True)
class Merged:
    """Several settings types as one bundle (compact's stages): a name two of them declare is one
    option when both spell it the same; a name in `given_by` is an option the command declares
    itself, and its value goes to every stage field of that name. Any other clash is an error."""

    declarations: tuple[type, ...]
    given_by: frozenset[str] = frozenset()

    def parameters(self, others: Iterable[str]) -> list[inspect.Parameter]:
        outside = set(others)
        found: dict[str, tuple[inspect.Parameter, Flag | None]] = {}
        for declaration in self.declarations:
            flags = {item.name: flag_of(item) for item in dataclasses.fields(declaration)}
            for parameter in parameters(declaration):
                if parameter.name in self.given_by and parameter.name in outside:
                    continue
                if parameter.name in outside or (parameter.name in found and found[parameter.name][1] != flags[parameter.name]):
                    raise TypeError(f"{declaration.__name__}.{parameter.name}: declared with another meaning elsewhere; resolve it in given_by")
                found.setdefault(parameter.name, (parameter, flags[parameter.name]))
        return [parameter for parameter, _ in found.values()]

    def names(self) -> set[str]:
        return {item.name for declaration in self.declarations for item in dataclasses.fields(declaration)} - set(self.given_by)

    def build(self, values: Mapping[str, Any]) -> dict[type, Any]:
        return {declaration: build(declaration, values) for declaration in self.declarations}


class DeclaredCommand:
    """A command with its bundles expanded: called with every parameter's value by keyword (typer
    calls it so), it hands the command one instance per bundle. Its signature is the declared one
    (`declared`, cli/declare.py's parameters) and, for typer, typer's (`__signature__`, made when
    typer first asks, so a command run without typer never imports it)."""

    def __init__(self, command: Callable[..., Any], declared: inspect.Signature, bundles: Mapping[str, type | Merged]) -> None:
        functools.update_wrapper(self, command)
        self._command = command
        self.declared = declared
        self._bundles = dict(bundles)
        self.__annotations__ = {}  # the signature carries them, resolved

    @functools.cached_property
    def __signature__(self) -> inspect.Signature:
        from .typed import typer_signature

        return typer_signature(self.declared)

    def __call__(self, **values: Any) -> Any:
        """The command as typer runs it: the declared usage errors and exits as typer's own."""
        from .typed import as_typer_errors

        with as_typer_errors():
            return self.run(values)

    def run(self, values: Mapping[str, Any]) -> Any:
        """The command on parsed values (cli/direct.py calls it so: declared errors and exits stay as they are)."""
        bundles = self._bundles
        given = {key: bundle.build(values) if isinstance(bundle, Merged) else build(bundle, values) for key, bundle in bundles.items()}
        taken = set().union(
            *(bundle.names() if isinstance(bundle, Merged) else {item.name for item in dataclasses.fields(bundle)} for bundle in bundles.values())
        )
        return self._command(**{name: value for name, value in values.items() if name not in taken}, **given)


def with_options(**bundles: type | Merged) -> Callable[[Command], Command]:
    """Expand each bundle (a dataclass) into the command's keyword parameters; the command receives
    one instance per keyword. Two bundles declaring the same name is an error when the CLI is built."""

    def wrap(command: Command) -> Command:
        hints = typing.get_type_hints(command, include_extras=True)
        own = [
            parameter.replace(annotation=hints.get(name, parameter.annotation))
            for name, parameter in inspect.signature(command).parameters.items()
            if name not in bundles
        ]
        plain = [parameter for bundle in bundles.values() if not isinstance(bundle, Merged) for parameter in parameters(bundle)]
        outside = [parameter.name for parameter in [*plain, *own]]
        merged = [parameter for bundle in bundles.values() if isinstance(bundle, Merged) for parameter in bundle.parameters(outside)]
        every = [*plain, *merged, *own]
        names = [parameter.name for parameter in every]
        if len(set(names)) != len(names):
            raise TypeError(f"{command.__name__}: options declared twice: {sorted({n for n in names if names.count(n) > 1})}")
        declared = inspect.Signature([parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY) for parameter in every])
        return typing.cast(Command, DeclaredCommand(command, declared, bundles))

    return wrap
