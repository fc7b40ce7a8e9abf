"""A plain command line run without typer: importing typer and click costs more than a small
command's whole run, so a valid argv is parsed here from the command's own declarations (its
DeclaredCommand's signature, cli/declare.py's parameters, read as typer reads them) and the command
runs at once. Anything this parser does not model (help, an unknown or malformed option, a value
only typer's converter can judge, a missing argument, shell completion…) returns None, and typer
answers it as it always has, so its messages and exit codes stay typer's. The options' checks run
with the command, as typer runs them (in click's order, with the standard streams and signals set
up): a value a check refuses is said here as click says it, never handed to typer to be checked again.
tests/test_direct.py checks that both give a command the same values, and the same bytes.
"""

from __future__ import annotations

import gc
import inspect
import os
import types
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from . import declare
from .plain import NOT_PLAIN, plain_value
from .run import flush_stdout, loading, pipe_broke, run_command_line
from .status import ExitStatus

# What a declaration may say and still be parsed here: the rest (envvar=, parser=, count=, …) is typer's.
MODELLED_SETTINGS = frozenset({"help", "show_default", "metavar", "min", "max", "callback"})
COMPLETION = "_CTXPIPE_COMPLETE"  # click's shell completion for prog "ctxpipe": typer's to answer


class Slot:
    """One parameter of a command as this parser reads it."""

    __slots__ = ("name", "option", "names", "first", "negations", "kind", "many", "flag", "default", "required", "low", "high", "check")

    def __init__(self, name: str, parameter: declare.Parameter, base: Any, default: Any) -> None:
        self.name = name
        self.option = parameter.kind == "option"
        names = [part for spelled in parameter.names for part in spelled.split("/")[:1]]
        self.names = tuple(names)
        self.first = parameter.names[0] if parameter.names else ""  # as declared ("--x/--no-x" whole)
        self.negations = tuple(spelled.split("/", 1)[1] for spelled in parameter.names if "/" in spelled)
        self.many = typing.get_origin(base) is list
        self.kind = typing.get_args(base)[0] if self.many else base
        self.flag = self.option and base is bool
        self.required = default is inspect.Parameter.empty
        self.default = None if self.required else default
        self.low = parameter.settings.get("min")
        self.high = parameter.settings.get("max")
        self.check = parameter.settings.get("callback")  # typer runs it on the value, given or not

    def hint(self, given: str | None) -> str:
        """How click names this option in a usage error its check raised with `given` as the hint."""
        if given == declare.THIS_OPTION:
            return self.first  # cli/typed.py hands typer the first declaration for it
        return given if given is not None else " / ".join(f"'{name}'" for name in self.names)  # click's Option.get_error_hint


def _without_none(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [part for part in typing.get_args(annotation) if part is not type(None)]
        return rest[0] if len(rest) == 1 else None
    return annotation


def slots(declared: inspect.Signature) -> list[Slot] | None:
    """The command's parameters, or None when one of them is beyond this parser (typer then parses)."""
    found = []
    for parameter in declared.parameters.values():
        if typing.get_origin(parameter.annotation) is not Annotated:
            return None
        base, *metadata = typing.get_args(parameter.annotation)
        declarations = [item for item in metadata if isinstance(item, declare.Parameter)]
        if len(declarations) != 1 or set(declarations[0].settings) - MODELLED_SETTINGS:
            return None
        slot = Slot(parameter.name, declarations[0], _without_none(base), parameter.default)
        if not _modelled(slot, declarations[0]):
            return None
        if slot.default is not None:  # typer converts a default as it converts a value (and checks it, with the command)
            slot.default = plain_value(slot.kind, None, None, slot.default)
            if slot.default is NOT_PLAIN:
                return None
        found.append(slot)
    if sum(1 for slot in found if not slot.option) > 1:
        return None
    return found


def _modelled(slot: Slot, parameter: declare.Parameter) -> bool:
    if slot.many and (slot.kind is not str or slot.default is not None):  # typer's list of str, None when not given
        return False
    if slot.option:
        spelled_ok = bool(slot.names) and all(name.startswith("--") or (len(name) == 2 and name[0] == "-") for name in slot.names + slot.negations)
        return spelled_ok and (not slot.negations or slot.flag) and not (slot.flag and slot.many)
    # An argument's check would run where its first token was given, and click names it by its
    # metavar: none has one, and typer parses a command whose argument would.
    return not parameter.names and slot.check is None


Checks = list[tuple[Slot, Callable[[Any], Any]]]  # the options to check, each with its check, in click's order


def parse(found: Sequence[Slot], argv: Sequence[str]) -> tuple[dict[str, Any], Checks] | None:
    """The values typer would hand the command for `argv` before the options' checks, and the options
    to check (in click's order); None where typer must answer."""
    spelled: dict[str, tuple[Slot, bool]] = {}
    for slot in found:
        spelled.update({name: (slot, True) for name in slot.names})
        spelled.update({name: (slot, False) for name in slot.negations})
    given: dict[str, Any] = {}
    positional: list[str] = []
    at = 0
    while at < len(argv):
        token = argv[at]
        at += 1
        if token == "--":
            positional.extend(argv[at:])
            break
        if not token.startswith("-") or token == "-":
            positional.append(token)
            continue
        name, equals, text = token.partition("=") if token.startswith("--") else (token, "", "")
        if name not in spelled:
            return None
        slot, on = spelled[name]
        if slot.flag:
            if equals:
                return None
            value: Any = on
        else:
            if not equals:
                if at == len(argv) or (argv[at].startswith("-") and argv[at] != "-"):
                    return None
                text = argv[at]
                at += 1
            value = plain_value(slot.kind, slot.low, slot.high, text)
            if value is NOT_PLAIN:
                return None
        if slot.many:
            given.setdefault(slot.name, []).append(value)
        else:
            given[slot.name] = value  # given twice: the last one, as click takes it
    values: dict[str, Any] = {}
    for slot in found:
        if slot.option:
            if slot.name in given:
                values[slot.name] = given[slot.name]
            elif slot.required:
                return None
            else:
                values[slot.name] = slot.default
            continue
        converted = [plain_value(slot.kind, slot.low, slot.high, text) for text in positional]
        if NOT_PLAIN in converted or (not slot.many and len(converted) > 1) or (slot.required and not converted):
            return None
        values[slot.name] = (converted or slot.default) if slot.many else (converted[0] if converted else slot.default)
        positional = []
    if positional:
        return None
    # The checks in the order click runs them: the options given, by where each was first given (a
    # dict keeps its first place), then the others on their defaults, as declared.
    by_name = {slot.name: slot for slot in found}
    order = [by_name[name] for name in given] + [slot for slot in found if slot.name not in given]
    return values, [(slot, slot.check) for slot in order if slot.check is not None]


def checked(values: dict[str, Any], checks: Checks) -> dict[str, Any]:
    """The values the command gets: each through its option's check, in `checks`' order (the value a
    check returns is the one the command gets). A check's refusal is raised as it comes, naming the
    option as click names it; anything else a check raises (a price table that is not one) is the run's."""
    for slot, check in checks:
        try:
            values[slot.name] = check(values[slot.name])
        except declare.BadParameter as exc:
            raise declare.BadParameter(exc.message, slot.hint(exc.param_hint)) from None
    return values


def command(name: str) -> Any:
    """Command `name`'s DeclaredCommand, or None for a name typer must handle."""
    from .commands import command_function

    try:
        function, settings = command_function(name)
    except KeyError:
        return None
    return None if settings or not hasattr(function, "declared") else function


def main(argv: Sequence[str]) -> None:
    """Run a plain command line here and exit; return when typer must answer it."""
    if not argv or argv[0].startswith("-") or os.environ.get(COMPLETION) is not None:
        return
    name = argv[0]
    with loading():
        function = command(name)
        found = None if function is None else slots(function.declared)
    # Off while the modules loaded (cli/entry.py): the command's own work collects as usual. What is
    # loaded stays for the whole run, so it is frozen first: a collection (the run's own imports set
    # several off) walks only what was made since, not every module's functions and classes.
    gc.freeze()
    gc.enable()
    try:
        with loading():  # Ctrl-C in here ends as while loading, quietly
            parsed = None if found is None else parse(found, argv[1:])
    except Exception:  # a line this parser trips on is typer's to answer, as any it does not model
        return
    if parsed is None:
        return
    values, checks = parsed

    def invoke() -> int:
        # The checks run here, as typer runs them: after the standard streams and the signals are set
        # up (a warning a check writes, a FIFO its file names), each once; a refusal (BadParameter) is
        # said by run_command_line, as the command's own usage errors are.
        try:
            ready = checked(values, checks)
        except BrokenPipeError:  # a check's warning, and stderr's reader gone: as typer ends a parse whose pipe broke
            return pipe_broke()
        try:
            function.run(ready)
        except declare.Exit as exc:
            return exc.exit_code
        flush_stdout()
        return ExitStatus.OK

    run_command_line(invoke, in_process=False, name=name)
